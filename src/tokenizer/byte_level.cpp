#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace tpbatch::tok {

namespace {

struct Table {
  std::array<uint32_t, 256> cp{};
  std::array<std::string, 256> text;
  std::array<int16_t, 512> back{};  // code point (< 512) -> byte, or -1
  Table() {
    back.fill(-1);
    uint32_t n = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      cp[b] = printable ? b : 256 + n++;
      utf8_append(text[b], cp[b]);
      back[cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

std::optional<uint8_t> char_to_byte(uint32_t cp) {
  if (cp >= 512) return std::nullopt;
  int16_t b = table().back[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string bytes_to_chars(std::string_view s) {
  const Table& t = table();
  std::string out;
  out.reserve(s.size() * 2);
  for (char c : s) out += t.text[static_cast<uint8_t>(c)];
  return out;
}

}  // namespace tpbatch::tok
