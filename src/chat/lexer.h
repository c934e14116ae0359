#pragma once
// Splits a Jinja template into text, {{ expression }} and {% statement %} pieces, applying
// whitespace control as jinja2 does with Hugging Face's settings: trim_blocks (the newline after
// a block or comment tag is dropped), lstrip_blocks (spaces and tabs before a block or comment
// tag at the start of a line are dropped), "-" on a tag side strips all whitespace on that side,
// "+" turns lstrip/trim off for that side, keep_trailing_newline off, {# comments #} removed.
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.h"

namespace tpbatch::chat {

struct Token {
  enum class Kind { Name, String, Int, Float, Op, End };
  Kind kind = Kind::End;
  std::string text;  // the name, the operator, or the string's decoded value
  SourcePos pos;
};

struct Piece {
  enum class Kind { Text, Output, Statement };
  Kind kind = Kind::Text;
  std::string text;             // Text
  std::vector<Token> tokens;    // Output / Statement, ending with an End token
  SourcePos pos;
};

// Throws TemplateError naming the position of an unclosed tag or string, or an unknown character.
std::vector<Piece> lex_template(std::string_view source);

}  // namespace tpbatch::chat
