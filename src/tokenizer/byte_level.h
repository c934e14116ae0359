#pragma once
// GPT-2's byte <-> printable-character table (bytes_to_unicode).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tpbatch::tok {

// The byte a code point stands for, if it is one of the 256 table characters.
std::optional<uint8_t> char_to_byte(uint32_t cp);
// Maps every byte of s to its character.
std::string bytes_to_chars(std::string_view s);

}  // namespace tpbatch::tok
