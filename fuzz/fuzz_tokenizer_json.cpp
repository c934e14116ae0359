// libFuzzer target: tpbatch::Tokenizer::from_json_text on arbitrary text, then (when it loads) a few
// encodes and decodes. Expected: a tokenizer or tpbatch::Error. Anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<tpbatch::Tokenizer> tok;
  try {
    tok = tpbatch::Tokenizer::from_json_text(text, "fuzz/tokenizer.json");
  } catch (const tpbatch::Error&) {
    return 0;
  }
  static const char* const kProbes[] = {"", "Hello world", " a  b\n\tc", "caf\xc3\xa9 \xe2\x96\x81x \xff\xfe",
                                        "<s></s><unk>", "12345 ab-cd's"};
  const int32_t vocab = tok->vocab_size();
  if (vocab < 0) std::abort();
  for (const char* p : kProbes) {
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = tok->encode(p, special);
      for (int32_t id : ids)
        if (id < 0 || id >= vocab) std::abort();  // every id inside the vocabulary
      (void)tok->decode(ids, true);
      (void)tok->decode(ids, false);
    }
  }
  for (int32_t id = 0; id < vocab && id < 64; ++id) {
    const std::string piece = tok->id_to_token(id);
    (void)tok->token_to_id(piece);
    (void)tok->is_special(id);
  }
  return 0;
}
