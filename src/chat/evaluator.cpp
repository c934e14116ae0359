#include "chat/evaluator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "chat/python_str.h"
#include "chat/renderer.h"

namespace tpbatch::chat {

void check_string_size(size_t bytes, const SourcePos& p, const std::string& what) {
  if (bytes > kMaxStringBytes)
    fail(p, what + " would be " + std::to_string(bytes) + " bytes, over the template limit of " +
                std::to_string(kMaxStringBytes) + " bytes");
}

void Renderer::run(const Body& body, std::string& out) {
  for (const auto& s : body) exec(*s, out);
}

// ---- scopes ----
const Value* Renderer::lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    for (const auto& kv : *it)
      if (kv.first == name) return &kv.second;
  return nullptr;
}

void Renderer::assign(const std::string& name, Value v) {
  for (auto& kv : scopes_.back())
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  scopes_.back().emplace_back(name, std::move(v));
}

// ---- statements ----
void Renderer::exec(const Stmt& s, std::string& out) {
  switch (s.kind) {
    case Stmt::Kind::Text:
      out += s.text;
      check_string_size(out.size(), s.pos, "the rendered prompt");
      return;
    case Stmt::Kind::Output: {
      const Value v = eval(*s.expr);
      out += v.str();
      check_string_size(out.size(), s.pos, "the rendered prompt");
      return;
    }
    case Stmt::Kind::If:
      for (const auto& [cond, body] : s.branches)
        if (eval(*cond).truthy()) {
          run(body, out);
          return;
        }
      run(s.else_body, out);
      return;
    case Stmt::Kind::For: exec_for(s, out); return;
    case Stmt::Kind::Set: {
      Value v = eval(*s.expr);
      if (s.set_attribute.empty()) {
        assign(s.targets[0], std::move(v));
        return;
      }
      const Value* ns = lookup(s.targets[0]);
      if (!ns || !ns->is_namespace)
        fail(s.pos, "{% set " + s.targets[0] + "." + s.set_attribute + " %}: '" + s.targets[0] +
                        "' is not a namespace()");
      Value target = *ns;  // shares the namespace's dict
      target.set(s.set_attribute, std::move(v));
      return;
    }
    case Stmt::Kind::Break: throw BreakLoop{};
    case Stmt::Kind::Continue: throw ContinueLoop{};
  }
}

List Renderer::iterate(const Value& v, const SourcePos& p) {
  switch (v.kind) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return *v.list;
    case Value::Kind::Dict: {
      if (v.is_namespace) fail(p, "a namespace is not iterable");
      List keys;
      for (const auto& kv : *v.dict) keys.push_back(Value::string(kv.first));
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      const auto cps = code_points(v.s);
      for (size_t k = 0; k < cps.size(); ++k) chars.push_back(Value::string(from_code_points(cps, k, k + 1)));
      return chars;
    }
    default: fail(p, "'" + v.type_name() + "' object is not iterable");
  }
}

void Renderer::bind_targets(const Stmt& s, const Value& item) {
  if (s.targets.size() == 1) {
    assign(s.targets[0], item);
    return;
  }
  List parts = iterate(item, s.pos);
  if (parts.size() != s.targets.size())
    fail(s.pos, "cannot unpack " + std::to_string(parts.size()) + " values into " +
                    std::to_string(s.targets.size()) + " loop variables");
  for (size_t k = 0; k < parts.size(); ++k) assign(s.targets[k], parts[k]);
}

void Renderer::exec_for(const Stmt& s, std::string& out) {
  List items = iterate(eval(*s.expr), s.pos);
  scopes_.emplace_back();
  if (s.filter) {  // the filter runs before loop.* is known, as in Jinja
    List kept;
    for (const Value& item : items) {
      bind_targets(s, item);
      if (eval(*s.filter).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t k = 0; k < n; ++k) {
    if (++iterations_ > kMaxLoopIterations)
      fail(s.pos, "the template ran more than " + std::to_string(kMaxLoopIterations) +
                      " loop iterations, the template limit");
    bind_targets(s, items[static_cast<size_t>(k)]);
    Dict loop = {{"index0", Value::integer(k)},
                 {"index", Value::integer(k + 1)},
                 {"revindex0", Value::integer(n - k - 1)},
                 {"revindex", Value::integer(n - k)},
                 {"first", Value::boolean(k == 0)},
                 {"last", Value::boolean(k == n - 1)},
                 {"length", Value::integer(n)},
                 {"depth", Value::integer(1)},
                 {"depth0", Value::integer(0)},
                 {"previtem", k > 0 ? items[static_cast<size_t>(k - 1)] : Value::undefined("loop.previtem")},
                 {"nextitem", k + 1 < n ? items[static_cast<size_t>(k + 1)] : Value::undefined("loop.nextitem")}};
    assign("loop", Value::new_dict(std::move(loop)));
    try {
      run(s.body, out);
    } catch (const ContinueLoop&) {
      continue;
    } catch (const BreakLoop&) {
      break;
    }
  }
  scopes_.pop_back();
  if (n == 0) run(s.else_body, out);
}

// ---- expressions ----
Value Renderer::eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.literal;
    case Expr::Kind::Name: {
      const Value* v = lookup(e.name);
      return v ? *v : Value::undefined(e.name);
    }
    case Expr::Kind::List: {
      List items;
      for (const auto& a : e.args) items.push_back(eval(*a));
      return Value::new_list(std::move(items));
    }
    case Expr::Kind::Dict: {
      Value d = Value::new_dict();
      for (size_t k = 0; k < e.args.size(); ++k) {
        const Value key = eval(*e.args[k]);
        if (!key.is_string()) fail(e.args[k]->pos, "only string keys are supported in dict literals");
        d.set(key.s, eval(*e.values[k]));
      }
      return d;
    }
    case Expr::Kind::Attr: return attribute(eval(*e.a), e.name, e.pos);
    case Expr::Kind::Item: return item(eval(*e.a), eval(*e.b), e.pos);
    case Expr::Kind::Slice: {
      const Value obj = eval(*e.a);
      Value start = e.slice_start ? eval(*e.slice_start) : Value::none();
      Value stop = e.slice_stop ? eval(*e.slice_stop) : Value::none();
      Value step = e.slice_step ? eval(*e.slice_step) : Value::none();
      if (obj.is_list()) {
        List out;
        for (size_t k : slice_indices(static_cast<int64_t>(obj.list->size()), &start, &stop, &step, e.pos))
          out.push_back((*obj.list)[k]);
        return Value::new_list(std::move(out));
      }
      if (obj.is_string()) {
        const auto cps = code_points(obj.s);
        std::vector<uint32_t> out;
        for (size_t k : slice_indices(static_cast<int64_t>(cps.size()), &start, &stop, &step, e.pos))
          out.push_back(cps[k]);
        return Value::string(from_code_points(out));
      }
      if (obj.is_undefined()) fail(e.pos, undefined_message(obj) + " (sliced)");
      fail(e.pos, "'" + obj.type_name() + "' object cannot be sliced");
    }
    case Expr::Kind::Call: return call(e);
    case Expr::Kind::Filter: return filter(e);
    case Expr::Kind::Test: {
      const Value obj = eval(*e.a);
      std::vector<Value> args;
      for (const auto& a : e.args) args.push_back(eval(*a));
      const bool r = test(e.name, obj, args, e.pos);
      return Value::boolean(e.negated ? !r : r);
    }
    case Expr::Kind::Not: return Value::boolean(!eval(*e.a).truthy());
    case Expr::Kind::Neg: {
      const Value v = eval(*e.a);
      if (v.kind == Value::Kind::Float) return Value::number(-v.f);
      if (is_int_like(v)) return Value::integer(-as_int(v));
      fail(e.pos, "bad operand type for unary -: '" + v.type_name() + "'");
    }
    case Expr::Kind::Binary: return binary(e);
    case Expr::Kind::Cond:
      if (eval(*e.b).truthy()) return eval(*e.a);
      return e.c ? eval(*e.c) : Value::undefined("the else branch of a conditional expression");
  }
  fail(e.pos, "internal error: unknown expression");
}

std::string Renderer::undefined_message(const Value& v) {
  return v.undefined_name.empty() ? "a value is undefined" : "'" + v.undefined_name + "' is undefined";
}

Value Renderer::attribute(const Value& obj, const std::string& name, const SourcePos& p) {
  if (obj.is_undefined()) fail(p, undefined_message(obj) + " (reading ." + name + ")");
  if (obj.is_dict()) {
    if (const Value* v = obj.find(name)) return *v;
  }
  return Value::undefined(obj.type_name() + " object has no attribute '" + name + "': it");
}

Value Renderer::item(const Value& obj, const Value& key, const SourcePos& p) {
  if (obj.is_undefined()) fail(p, undefined_message(obj) + " (reading [" + key.repr() + "])");
  if (obj.is_dict()) {
    if (key.is_string())
      if (const Value* v = obj.find(key.s)) return *v;
    return Value::undefined(obj.type_name() + " object has no element " + key.repr() + ": it");
  }
  if ((obj.is_list() || obj.is_string()) && is_int_like(key)) {
    int64_t k = as_int(key);
    if (obj.is_list()) {
      const int64_t n = static_cast<int64_t>(obj.list->size());
      if (k < 0) k += n;
      if (k >= 0 && k < n) return (*obj.list)[static_cast<size_t>(k)];
    } else {
      const auto cps = code_points(obj.s);
      const int64_t n = static_cast<int64_t>(cps.size());
      if (k < 0) k += n;
      if (k >= 0 && k < n) return Value::string(from_code_points(cps, static_cast<size_t>(k), static_cast<size_t>(k) + 1));
    }
    return Value::undefined(obj.type_name() + " object has no element " + key.repr() + ": it");
  }
  if (key.is_string()) return attribute(obj, key.s, p);
  fail(p, "'" + obj.type_name() + "' object is not subscriptable with " + key.type_name());
}

bool Renderer::less(const Value& a, const Value& b, const SourcePos& p) {
  if (a.is_number() && b.is_number()) return as_double(a) < as_double(b);
  if (a.is_string() && b.is_string()) return a.s < b.s;  // UTF-8 byte order = code point order
  fail(p, "'<' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool Renderer::contains(const Value& container, const Value& x, const SourcePos& p) {
  if (container.is_string()) {
    if (!x.is_string()) fail(p, "'in <string>' requires a string on the left, got " + x.type_name());
    return container.s.find(x.s) != std::string::npos;
  }
  if (container.is_list())
    return std::any_of(container.list->begin(), container.list->end(), [&](const Value& e) { return equal(e, x); });
  if (container.is_dict()) return x.is_string() && container.find(x.s) != nullptr;
  if (container.is_undefined()) return false;
  fail(p, "argument of type '" + container.type_name() + "' is not iterable");
}

// One function: one branch per Jinja binary operator, a dispatch table read top to bottom.
Value Renderer::binary(const Expr& e) {
  const std::string& op = e.name;
  if (op == "and") {
    Value l = eval(*e.a);
    return l.truthy() ? eval(*e.b) : l;
  }
  if (op == "or") {
    Value l = eval(*e.a);
    return l.truthy() ? l : eval(*e.b);
  }
  const Value l = eval(*e.a);
  const Value r = eval(*e.b);
  if (op == "~") {
    std::string joined = l.str();
    const std::string right = r.str();
    check_string_size(joined.size() + right.size(), e.pos, "'~' of two strings");
    return Value::string(joined + right);
  }
  if (op == "==") return Value::boolean(equal(l, r));
  if (op == "!=") return Value::boolean(!equal(l, r));
  if (op == "<") return Value::boolean(less(l, r, e.pos));
  if (op == ">") return Value::boolean(less(r, l, e.pos));
  if (op == "<=") return Value::boolean(!less(r, l, e.pos));
  if (op == ">=") return Value::boolean(!less(l, r, e.pos));
  if (op == "in") return Value::boolean(contains(r, l, e.pos));
  if (op == "not in") return Value::boolean(!contains(r, l, e.pos));
  if (l.is_undefined() || r.is_undefined())
    fail(e.pos, undefined_message(l.is_undefined() ? l : r) + " (operand of '" + op + "')");
  if (op == "+") {
    if (l.is_string() && r.is_string()) {
      check_string_size(l.s.size() + r.s.size(), e.pos, "'+' of two strings");
      return Value::string(l.s + r.s);
    }
    if (l.is_list() && r.is_list()) {
      List out = *l.list;
      out.insert(out.end(), r.list->begin(), r.list->end());
      return Value::new_list(std::move(out));
    }
  }
  if (op == "*") {
    if ((l.is_string() && is_int_like(r)) || (r.is_string() && is_int_like(l))) {
      const std::string& s = l.is_string() ? l.s : r.s;
      const int64_t times = std::max<int64_t>(0, as_int(l.is_string() ? r : l));
      if (!s.empty() && times > 0)
        check_string_size(static_cast<size_t>(std::min<int64_t>(times, INT64_MAX / static_cast<int64_t>(s.size())) *
                                              static_cast<int64_t>(s.size())),
                          e.pos, "a string repeated " + std::to_string(times) + " times");
      std::string out;
      for (int64_t k = 0; k < times; ++k) out += s;
      return Value::string(out);
    }
  }
  if (l.is_number() && r.is_number()) {
    const bool ints = is_int_like(l) && is_int_like(r);
    const int64_t x = ints ? as_int(l) : 0, y = ints ? as_int(r) : 0;
    const double fx = as_double(l), fy = as_double(r);
    if (op == "+") return ints ? Value::integer(x + y) : Value::number(fx + fy);
    if (op == "-") return ints ? Value::integer(x - y) : Value::number(fx - fy);
    if (op == "*") return ints ? Value::integer(x * y) : Value::number(fx * fy);
    if (op == "/") {
      if (fy == 0) fail(e.pos, "division by zero");
      return Value::number(fx / fy);
    }
    if (op == "//" || op == "%") {
      if (fy == 0) fail(e.pos, "integer division or modulo by zero");
      if (ints) {
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python floors
        return Value::integer(op == "//" ? q : m);
      }
      const double q = std::floor(fx / fy);
      return Value::number(op == "//" ? q : fx - q * fy);
    }
    if (op == "**") {
      if (ints && y >= 0) {
        int64_t out = 1;
        for (int64_t k = 0; k < y; ++k) out *= x;
        return Value::integer(out);
      }
      return Value::number(std::pow(fx, fy));
    }
  }
  fail(e.pos, "unsupported operand types for " + op + ": '" + l.type_name() + "' and '" + r.type_name() + "'");
}

std::string render(const Template& tmpl, const Dict& globals) {
  std::string out;
  Renderer r(globals);
  try {
    r.run(tmpl.body, out);
  } catch (const BreakLoop&) {
    throw TemplateError("chat template: {% break %} outside a loop");
  } catch (const ContinueLoop&) {
    throw TemplateError("chat template: {% continue %} outside a loop");
  }
  return out;
}

}  // namespace tpbatch::chat
