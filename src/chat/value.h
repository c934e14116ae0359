#pragma once
// The values a chat template computes with, modelled on the Python objects jinja2 sees:
// undefined, None, bool, int, float, str, list, dict (insertion-ordered, as Python's) and the
// mutable namespace() object. Lists and dicts are shared, as Python references are.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpbatch::chat {

// Where in the template source something is (1-based).
struct SourcePos {
  int line = 1;
  int column = 1;
  std::string str() const { return "line " + std::to_string(line) + " column " + std::to_string(column); }
};

// A template that cannot be parsed or rendered: names the construct and its position.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws the TemplateError "chat template line L column C: <what>": the form of every error the
// lexer, the parser and the evaluator report at a place in the source.
[[noreturn]] void fail(const SourcePos& p, const std::string& what);

// raise_exception("...") called by the template: the message is the template's own.
class RaisedException : public TemplateError {
 public:
  using TemplateError::TemplateError;
};

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;

struct Value {
  enum class Kind { Undefined, None, Bool, Int, Float, String, List, Dict };
  Kind kind = Kind::Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  bool is_namespace = false;  // a namespace(): its attributes may be assigned with {% set ns.x = ... %}
  std::string undefined_name; // for messages: what was undefined

  static Value undefined(std::string name = "") {
    Value v;
    v.undefined_name = std::move(name);
    return v;
  }
  static Value none() { return make(Kind::None); }
  static Value boolean(bool x) {
    Value v = make(Kind::Bool);
    v.b = x;
    return v;
  }
  static Value integer(int64_t x) {
    Value v = make(Kind::Int);
    v.i = x;
    return v;
  }
  static Value number(double x) {
    Value v = make(Kind::Float);
    v.f = x;
    return v;
  }
  static Value string(std::string x) {
    Value v = make(Kind::String);
    v.s = std::move(x);
    return v;
  }
  static Value new_list(List items = {}) {
    Value v = make(Kind::List);
    v.list = std::make_shared<List>(std::move(items));
    return v;
  }
  static Value new_dict(Dict items = {}) {
    Value v = make(Kind::Dict);
    v.dict = std::make_shared<Dict>(std::move(items));
    return v;
  }
  static Value from_json(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_number() const { return kind == Kind::Int || kind == Kind::Float || kind == Kind::Bool; }
  bool is_list() const { return kind == Kind::List; }
  bool is_dict() const { return kind == Kind::Dict; }

  // The dict's value for key, or nullptr.
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);  // dicts only

  bool truthy() const;                  // Python bool()
  std::string str() const;              // Python str() (undefined: "")
  std::string repr() const;             // Python repr()
  std::string type_name() const;        // for messages: "str", "int", "list", ...

 private:
  static Value make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

bool equal(const Value& a, const Value& b);  // Python ==

// json.dumps(v, ensure_ascii=False, indent=indent) as Hugging Face's tojson filter does it
// (indent < 0: one line with ", " and ": " separators).
std::string to_json(const Value& v, int indent);

}  // namespace tpbatch::chat
