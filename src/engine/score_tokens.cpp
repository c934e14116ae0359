#include "engine/score_tokens.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace tpbatch {

namespace {

// The length of the trailing whitespace of `text` as Python's str.rstrip() sees it (str.isspace:
// ASCII whitespace, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F, U+3000).
size_t trailing_whitespace_bytes(std::string_view text) {
  size_t end = text.size();
  for (;;) {
    if (end == 0) return text.size();
    const unsigned char c = static_cast<unsigned char>(text[end - 1]);
    if (c < 0x80) {
      if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) {
        --end;
        continue;
      }
      return text.size() - end;
    }
    size_t start = end - 1;  // back to the lead byte of the last character
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    const std::string_view ch = text.substr(start, end - start);
    static const std::string_view spaces[] = {
        "\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82", "\xE2\x80\x83",
        "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89",
        "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
    if (std::find(std::begin(spaces), std::end(spaces), ch) == std::end(spaces)) return text.size() - end;
    end = start;
  }
}

}  // namespace

ScoreTokens lm_eval_score_tokens(const Tokenizer& tok, std::string_view context, std::string_view continuation,
                                 bool add_bos) {
  const size_t n_spaces = trailing_whitespace_bytes(context);
  std::string cont;
  if (n_spaces > 0) {  // the context's trailing whitespace belongs to the continuation
    cont.assign(context.substr(context.size() - n_spaces));
    context = context.substr(0, context.size() - n_spaces);
  }
  cont.append(continuation);
  std::string whole(context);
  whole += cont;
  ScoreTokens out;
  out.context = tok.encode(context, add_bos);
  const std::vector<int32_t> whole_ids = tok.encode(whole, add_bos);
  if (whole_ids.size() > out.context.size())
    out.continuation.assign(whole_ids.begin() + static_cast<std::ptrdiff_t>(out.context.size()), whole_ids.end());
  return out;
}

}  // namespace tpbatch
