#pragma once
// The jinja2 renderer behind render() (evaluator.h): statements and expressions in evaluator.cpp,
// calls, filters and tests in template_calls.cpp.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/parser.h"
#include "chat/value.h"

namespace tpbatch::chat {

// ---- limits ------------------------------------------------------------------------------------
// A template may not take unbounded memory or time (one row's template would end the whole job):
// range() as jinja2's sandbox bounds it (MAX_RANGE), every string a template builds and its
// rendering at 16 MiB (far past any context), and the loop iterations of one rendering.
constexpr int64_t kMaxRange = 100000;
constexpr size_t kMaxStringBytes = size_t{16} << 20;
constexpr int64_t kMaxLoopIterations = 1'000'000;


// Fails at `p` when a string the template builds would be over kMaxStringBytes.
void check_string_size(size_t bytes, const SourcePos& p, const std::string& what);

// {% break %} and {% continue %}, unwinding to their loop.
struct BreakLoop {};
struct ContinueLoop {};

class Renderer {
 public:
  explicit Renderer(const Dict& globals) { scopes_.push_back(globals); }
  void run(const Body& body, std::string& out);

 private:
  // scopes
  const Value* lookup(const std::string& name) const;
  void assign(const std::string& name, Value v);
  // statements
  void exec(const Stmt& s, std::string& out);
  List iterate(const Value& v, const SourcePos& p);
  void bind_targets(const Stmt& s, const Value& item);
  void exec_for(const Stmt& s, std::string& out);
  // expressions
  Value eval(const Expr& e);
  static std::string undefined_message(const Value& v);
  Value attribute(const Value& obj, const std::string& name, const SourcePos& p);
  Value item(const Value& obj, const Value& key, const SourcePos& p);
  static bool less(const Value& a, const Value& b, const SourcePos& p);
  static bool contains(const Value& container, const Value& x, const SourcePos& p);
  Value binary(const Expr& e);
  // calls, filters and tests (template_calls.cpp)
  std::vector<Value> positional(const Expr& e);
  Value call(const Expr& e);
  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count);
  static Value split(const std::string& s, const Value* sep, const SourcePos& p);
  const Value* kwarg(const Expr& e, const std::string& name, std::vector<Value>& storage);
  Value filter(const Expr& e);
  bool test(const std::string& t, const Value& v, const std::vector<Value>& args, const SourcePos& p);

  std::vector<Dict> scopes_;
  int64_t iterations_ = 0;  // loop iterations of this rendering (kMaxLoopIterations)
};

}  // namespace tpbatch::chat
