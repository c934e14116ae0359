#pragma once
// Jinja syntax tree for the subset chat templates use, and the parser that builds it from the
// lexer's pieces. Statements: if/elif/else, for (several targets, `if` filter, else, loop.*),
// set (a name or a namespace attribute), break/continue. Expressions: literals, lists, dicts,
// names, .attr, [index], [a:b:c] slices, calls, | filters, is [not] tests, not/and/or, unary -,
// + - * / // % ** ~, comparisons, in / not in, and `a if c else b`. Anything else is a
// TemplateError naming it and its position; names of filters, tests and functions are checked
// when the template is rendered (so an unsupported one in a branch never taken is harmless).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/lexer.h"
#include "chat/value.h"

namespace tpbatch::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind { Literal, Name, List, Dict, Attr, Item, Slice, Call, Filter, Test, Not, Neg, Binary, Cond };
  Kind kind = Kind::Literal;
  SourcePos pos;
  Value literal;                  // Literal
  std::string name;               // Name, Attr (attribute), Filter / Test (filter or test name), Binary (operator)
  ExprPtr a, b, c;                // operands: Attr/Item/Slice/Call/Filter/Test object = a; Item index = b;
                                  // Slice start/stop/step = a?b/c...; Binary left a, right b; Cond then a, cond b, else c
  ExprPtr slice_start, slice_stop, slice_step;  // Slice (each may be null)
  std::vector<ExprPtr> args;      // List items, Call/Filter/Test positional arguments, Dict keys
  std::vector<ExprPtr> values;    // Dict values
  std::vector<std::pair<std::string, ExprPtr>> kwargs;  // Call/Filter/Test keyword arguments
  bool negated = false;           // Test: is not
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind { Text, Output, If, For, Set, Break, Continue };
  Kind kind = Kind::Text;
  SourcePos pos;
  std::string text;                               // Text
  ExprPtr expr;                                   // Output, Set value, For iterable
  std::vector<std::pair<ExprPtr, Body>> branches; // If: (condition, body) for if and each elif
  Body else_body;                                 // If / For
  std::vector<std::string> targets;               // For loop variables; Set: name (and attribute)
  std::string set_attribute;                      // Set: {% set ns.attr = ... %}
  ExprPtr filter;                                 // For: `for x in xs if cond`
  Body body;                                      // For
};

struct Template {
  Body body;
};

// Throws TemplateError ("chat template line L column C: ...").
Template parse_template(std::string_view source);

}  // namespace tpbatch::chat
