#include "engine/constraint_vocabulary.h"

#include "tokenizer/byte_level.h"

namespace tpbatch {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string sentencepiece_bytes(const std::string& piece) {
  if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>' && hex_digit(piece[3]) >= 0 &&
      hex_digit(piece[4]) >= 0)
    return std::string(1, static_cast<char>(hex_digit(piece[3]) * 16 + hex_digit(piece[4])));
  std::string out;
  static const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  for (size_t i = 0; i < piece.size();) {
    if (piece.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += piece[i++];
    }
  }
  return out;
}

// Each character of a byte-level piece is one byte; a piece with other characters (an added
// token's plain text) is its own bytes.
std::string byte_level_bytes(const std::string& piece) {
  std::string out;
  for (size_t i = 0; i < piece.size();) {
    const unsigned char b = static_cast<unsigned char>(piece[i]);
    const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    uint32_t cp = len == 1 ? b : len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
    for (size_t k = 1; k < len && i + k < piece.size(); ++k) cp = (cp << 6) | (piece[i + k] & 0x3F);
    const auto byte = tok::char_to_byte(cp);
    if (!byte) return piece;
    out += static_cast<char>(*byte);
    i += len;
  }
  return out;
}

}  // namespace

std::shared_ptr<const guided::TokenBytes> constraint_vocabulary(const Tokenizer& tok) {
  auto v = std::make_shared<guided::TokenBytes>();
  const int32_t n = tok.vocab_size();
  v->bytes.resize(n);
  v->usable.assign(n, false);
  const bool sentencepiece = tok.token_to_id("<0x00>").has_value();
  for (int32_t id = 0; id < n; ++id) {
    if (tok.is_special(id)) continue;
    const std::string piece = tok.id_to_token(id);
    v->bytes[id] = sentencepiece ? sentencepiece_bytes(piece) : byte_level_bytes(piece);
    v->usable[id] = !v->bytes[id].empty();
  }
  return v;
}

}  // namespace tpbatch
