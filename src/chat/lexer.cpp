#include "chat/lexer.h"

#include "tokenizer/utf8.h"

#include <cctype>
#include <cstring>

namespace tpbatch::chat {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }


class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Piece> run() {
    std::vector<Piece> out;
    size_t i = 0;
    bool line_starting = true;
    while (i <= src_.size()) {
      size_t j = next_tag(i);
      std::string text = src_.substr(i, j == std::string::npos ? std::string::npos : j - i);
      const SourcePos text_pos = pos(i);
      if (j == std::string::npos) {
        emit_text(out, std::move(text), text_pos);
        break;
      }
      const char kind = src_[j + 1];
      size_t k = j + 2;
      const char sign = k < src_.size() && (src_[k] == '-' || src_[k] == '+') ? src_[k] : 0;
      if (sign == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks: block and comment tags
        const size_t l = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if ((l > 0 || line_starting) && l < text.size() &&
            text.find_first_not_of(" \t\v\f\r", l) == std::string::npos)
          text.resize(l);
      }
      emit_text(out, std::move(text), text_pos);
      if (sign) ++k;
      bool strip_after = false, keep_newline = false;
      if (kind == '#') {
        const size_t e = src_.find("#}", k);
        if (e == std::string::npos) fail(pos(j), "unclosed comment {#");
        strip_after = e > k && src_[e - 1] == '-';
        keep_newline = e > k && src_[e - 1] == '+';
        i = e + 2;
      } else {
        Piece p;
        p.kind = kind == '{' ? Piece::Kind::Output : Piece::Kind::Statement;
        p.pos = pos(j);
        i = lex_tag(k, kind == '{' ? '}' : '%', p, strip_after, keep_newline);
        out.push_back(std::move(p));
      }
      // What the closing tag consumes after itself: all whitespace ("-"), or one newline
      // (trim_blocks, block and comment tags only).
      const size_t before = i;
      if (strip_after) {
        while (i < src_.size() && is_space(src_[i])) ++i;
      } else if (kind != '{' && !keep_newline && i < src_.size() && src_[i] == '\n') {
        ++i;
      }
      line_starting = i > before && src_[i - 1] == '\n';
      if (i == src_.size()) break;
    }
    return out;
  }

 private:
  size_t next_tag(size_t from) const {
    for (size_t j = src_.find('{', from); j != std::string::npos; j = src_.find('{', j + 1))
      if (j + 1 < src_.size() && (src_[j + 1] == '{' || src_[j + 1] == '%' || src_[j + 1] == '#')) return j;
    return std::string::npos;
  }

  static void emit_text(std::vector<Piece>& out, std::string text, SourcePos p) {
    if (text.empty()) return;
    Piece piece;
    piece.kind = Piece::Kind::Text;
    piece.text = std::move(text);
    piece.pos = p;
    out.push_back(std::move(piece));
  }

  SourcePos pos(size_t offset) const {
    SourcePos p;
    for (size_t k = 0; k < offset && k < src_.size(); ++k) {
      if (src_[k] == '\n') {
        ++p.line;
        p.column = 1;
      } else if ((static_cast<unsigned char>(src_[k]) & 0xC0) != 0x80) {
        ++p.column;
      }
    }
    return p;
  }

  // Tokens up to the closing "}}" / "%}" (with an optional "-" or "+" before it); returns the
  // offset after the close.
  size_t lex_tag(size_t i, char close, Piece& p, bool& strip_after, bool& keep_newline) {
    const char* opener = close == '}' ? "{{" : "{%";
    for (;;) {
      while (i < src_.size() && is_space(src_[i])) ++i;
      if (i >= src_.size())
        fail(p.pos, std::string(opener) + " is never closed");
      auto closes_at = [&](size_t at) { return at + 1 < src_.size() && src_[at] == close && src_[at + 1] == '}'; };
      if (closes_at(i)) {
        p.tokens.push_back({Token::Kind::End, "", pos(i)});
        return i + 2;
      }
      if ((src_[i] == '-' || src_[i] == '+') && closes_at(i + 1)) {
        strip_after = src_[i] == '-';
        keep_newline = src_[i] == '+';
        p.tokens.push_back({Token::Kind::End, "", pos(i)});
        return i + 3;
      }
      Token t;
      t.pos = pos(i);
      const char c = src_[i];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = i;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        t.kind = Token::Kind::Name;
        t.text = src_.substr(i, e - i);
        i = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = i;
        while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        t.kind = Token::Kind::Int;
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          t.kind = Token::Kind::Float;
          ++e;
          while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
          size_t x = e + 1;
          if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
          if (x < src_.size() && std::isdigit(static_cast<unsigned char>(src_[x]))) {
            t.kind = Token::Kind::Float;
            e = x;
            while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
          }
        }
        for (size_t k = i; k < e; ++k)
          if (src_[k] != '_') t.text += src_[k];
        i = e;
      } else if (c == '\'' || c == '"') {
        t.kind = Token::Kind::String;
        i = lex_string(i, t);
      } else {
        static const char* two[] = {"**", "//", "==", "!=", "<=", ">="};
        t.kind = Token::Kind::Op;
        for (const char* op : two)
          if (src_.compare(i, 2, op) == 0) t.text = op;
        if (t.text.empty()) {
          if (!std::strchr("+-*/%~|.,:()[]{}<>=", c))
            fail(t.pos, "unexpected character '" + std::string(1, c) + "'");
          t.text = std::string(1, c);
        }
        i += t.text.size();
      }
      p.tokens.push_back(std::move(t));
    }
  }

  // A Python string literal; returns the offset after its closing quote.
  size_t lex_string(size_t i, Token& t) {
    const char q = src_[i++];
    while (i < src_.size() && src_[i] != q) {
      if (src_[i] != '\\' || i + 1 >= src_.size()) {
        t.text += src_[i++];
        continue;
      }
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': t.text += '\n'; break;
        case 't': t.text += '\t'; break;
        case 'r': t.text += '\r'; break;
        case '0': t.text += '\0'; break;
        case 'a': t.text += '\a'; break;
        case 'b': t.text += '\b'; break;
        case 'f': t.text += '\f'; break;
        case 'v': t.text += '\v'; break;
        case '\\': t.text += '\\'; break;
        case '\'': t.text += '\''; break;
        case '"': t.text += '"'; break;
        case '\n': break;  // line continuation
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          if (i + n > src_.size())
            fail(t.pos, "truncated \\" + std::string(1, e) + " escape");
          tok::utf8_append(t.text, static_cast<uint32_t>(std::stoul(src_.substr(i, n), nullptr, 16)));
          i += n;
          break;
        }
        default:  // Python keeps unknown escapes as they are
          t.text += '\\';
          t.text += e;
      }
    }
    if (i >= src_.size()) fail(t.pos, "unterminated string");
    return i + 1;
  }

  std::string src_;
};

}  // namespace

std::vector<Piece> lex_template(std::string_view source) {
  // As jinja2: line endings normalized to "\n", and (keep_trailing_newline off) one final
  // newline dropped.
  std::string src;
  src.reserve(source.size());
  for (size_t k = 0; k < source.size(); ++k) {
    if (source[k] == '\r') {
      src += '\n';
      if (k + 1 < source.size() && source[k + 1] == '\n') ++k;
    } else {
      src += source[k];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).run();
}

}  // namespace tpbatch::chat
