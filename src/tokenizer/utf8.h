#pragma once
// UTF-8 helpers that never fail: an invalid byte counts as a one-byte "character".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tpbatch::tok {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if the byte there does not
// start one (invalid lead byte, truncated or overlong sequence, surrogate, > U+10FFFF).
size_t utf8_valid_len(std::string_view s, size_t i);

// Length of the "character" at s[i]: a valid sequence, or 1 for an invalid byte.
inline size_t utf8_char_len(std::string_view s, size_t i) {
  size_t n = utf8_valid_len(s, i);
  return n == 0 ? 1 : n;
}

// Decodes the code point of a valid sequence of length n at s[i].
uint32_t utf8_decode(std::string_view s, size_t i, size_t n);

void utf8_append(std::string& out, uint32_t cp);

bool utf8_is_valid(std::string_view s);

// As Rust's String::from_utf8_lossy: each maximal invalid subpart becomes one U+FFFD.
std::string utf8_lossy(std::string_view s);

// Unicode White_Space (Rust's char::is_whitespace).
bool is_unicode_whitespace(uint32_t cp);
// Alphanumeric or '_' (word character for added-token single_word).
bool is_word_char(uint32_t cp);

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";

}  // namespace tpbatch::tok
