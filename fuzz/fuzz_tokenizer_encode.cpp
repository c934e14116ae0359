// libFuzzer target: encode arbitrary bytes with real tokenizers and decode them back.
// Tokenizers, loaded once: every tokenizer.json of tests/data/tokenizers.tar.xz (Llama-2 SPM,
// GPT-2, Llama-3 and Qwen2 pre-tokenizers) and the generated one of `make-model` (vocab 512).
// The first input byte picks the tokenizer and add_special_tokens; the rest is the text.
// Checks: encode never throws (tokenizer.h: "never throws on odd input"); every id is inside the
// vocabulary; decode and the incremental detokenizer take the ids without error; byte-level BPE
// without a normalizer (GPT-2) round-trips valid UTF-8 exactly.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tools/make_tokenizer.h"

namespace {

struct Loaded {
  std::string name;
  std::unique_ptr<tpbatch::Tokenizer> tok;
  bool round_trips = false;
};

bool valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return false;
    i += len;
  }
  return true;
}

std::vector<Loaded>& tokenizers() {
  static std::vector<Loaded> all = [] {
    std::vector<Loaded> out;
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(TPBATCH_TEST_TOKENIZERS_DIR, ec))
      if (std::filesystem::exists(e.path() / "tokenizer.json", ec)) files.push_back(e.path() / "tokenizer.json");
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      Loaded l{f.parent_path().filename().string(), tpbatch::Tokenizer::load(f)};
      l.round_trips = l.name == "gpt-2";
      out.push_back(std::move(l));
    }
    out.push_back({"generated-512", tpbatch::Tokenizer::from_json_text(tpbatch::make_tokenizer_json(512), "generated")});
    std::fprintf(stderr, "fuzz_tokenizer_encode: %zu tokenizers:", out.size());
    for (const auto& l : out) std::fprintf(stderr, " %s", l.name.c_str());
    std::fprintf(stderr, "\n");
    return out;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  auto& all = tokenizers();
  const Loaded& l = all[(data[0] >> 1) % all.size()];
  const bool special = data[0] & 1;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const tpbatch::Tokenizer& tok = *l.tok;

  const std::vector<int32_t> ids = tok.encode(text, special);
  const int32_t vocab = tok.vocab_size();
  for (int32_t id : ids)
    if (id < 0 || id >= vocab) {
      std::fprintf(stderr, "%s: id %d outside [0, %d)\n", l.name.c_str(), id, vocab);
      std::abort();
    }
  const std::string back = tok.decode(ids, false);
  (void)tok.decode(ids, true);
  if (l.round_trips && valid_utf8(text) && back != text) {
    std::fprintf(stderr, "%s: decode(encode(text)) != text (%zu vs %zu bytes)\n", l.name.c_str(), back.size(),
                 text.size());
    std::abort();
  }
  // Generation-style detokenization: the first ids as the prompt, the rest one at a time.
  const size_t split = std::min<size_t>(ids.size(), 3);
  tpbatch::IncrementalDetokenizer detok(tok, std::span<const int32_t>(ids.data(), split));
  for (size_t i = split; i < ids.size(); ++i) (void)detok.push(ids[i]);
  (void)detok.flush_text();
  for (size_t i = 0; i < ids.size() && i < 8; ++i) (void)tok.token_to_id(tok.id_to_token(ids[i]));
  return 0;
}
