// The renderer's calls: functions and methods, filters and tests (renderer.h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "chat/python_str.h"
#include "chat/renderer.h"

namespace tpbatch::chat {

std::vector<Value> Renderer::positional(const Expr& e) {
  std::vector<Value> out;
  for (const auto& a : e.args) out.push_back(eval(*a));
  return out;
}

// One function: one branch per global function and method name, a dispatch table read top to bottom.
Value Renderer::call(const Expr& e) {
  const Expr& callee = *e.a;
  if (callee.kind == Expr::Kind::Name && !lookup(callee.name)) {
    const std::string& f = callee.name;
    std::vector<Value> args = positional(e);
    if (f == "raise_exception") {
      throw RaisedException(args.empty() ? std::string("raise_exception() called") : args[0].str());
    }
    if (f == "namespace") {
      Value ns = Value::new_dict();
      ns.is_namespace = true;
      for (const auto& a : args)
        if (a.is_dict())
          for (const auto& kv : *a.dict) ns.set(kv.first, kv.second);
      for (const auto& [k, v] : e.kwargs) ns.set(k, eval(*v));
      return ns;
    }
    if (f == "range") {
      if (args.empty() || args.size() > 3) fail(e.pos, "range() takes 1 to 3 arguments");
      for (const auto& a : args)
        if (!is_int_like(a)) fail(e.pos, "range() arguments must be integers");
      int64_t start = 0, stop = 0, step = 1;
      if (args.size() == 1) stop = as_int(args[0]);
      else start = as_int(args[0]), stop = as_int(args[1]);
      if (args.size() == 3) step = as_int(args[2]);
      if (step == 0) fail(e.pos, "range() step must not be zero");
      const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
      const __int128 items = span <= 0 ? 0 : (span + (step > 0 ? step : -__int128{step}) - 1) / (step > 0 ? step : -__int128{step});
      if (items > kMaxRange)
        fail(e.pos, "range() of " + std::to_string(static_cast<long long>(std::min<__int128>(items, INT64_MAX))) +
                        " items is over the template limit of " + std::to_string(kMaxRange) +
                        " (as jinja2's sandbox)");
      List out;
      for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out.push_back(Value::integer(k));
      return Value::new_list(std::move(out));
    }
    fail(callee.pos, "unsupported function '" + f + "()'");
  }
  if (callee.kind == Expr::Kind::Attr) {
    const Value obj = eval(*callee.a);
    std::vector<Value> args = positional(e);
    const std::string& m = callee.name;
    auto arg = [&](size_t k) -> const Value* { return k < args.size() ? &args[k] : nullptr; };
    if (obj.is_string()) {
      if (m == "strip") return Value::string(py_strip(obj.s, true, true, arg(0)));
      if (m == "lstrip") return Value::string(py_strip(obj.s, true, false, arg(0)));
      if (m == "rstrip") return Value::string(py_strip(obj.s, false, true, arg(0)));
      if (m == "lower") return Value::string(py_case(obj.s, 0));
      if (m == "upper") return Value::string(py_case(obj.s, 1));
      if (m == "capitalize") return Value::string(py_case(obj.s, 2));
      if (m == "title") return Value::string(py_case(obj.s, 3));
      if ((m == "startswith" || m == "endswith") && args.size() == 1 && args[0].is_string()) {
        const std::string& x = args[0].s;
        const bool r = m == "startswith" ? obj.s.rfind(x, 0) == 0
                                         : obj.s.size() >= x.size() && obj.s.compare(obj.s.size() - x.size(), x.size(), x) == 0;
        return Value::boolean(r);
      }
      if (m == "replace" && args.size() >= 2 && args[0].is_string() && args[1].is_string())
        return Value::string(replace_all(obj.s, args[0].s, args[1].s, args.size() > 2 ? as_int(args[2]) : -1));
      if (m == "split") return split(obj.s, arg(0), e.pos);
    }
    if (obj.is_dict() && !obj.is_namespace) {
      if (m == "items" && args.empty()) {
        List out;
        for (const auto& kv : *obj.dict) out.push_back(Value::new_list({Value::string(kv.first), kv.second}));
        return Value::new_list(std::move(out));
      }
      if (m == "keys" && args.empty()) {
        List out;
        for (const auto& kv : *obj.dict) out.push_back(Value::string(kv.first));
        return Value::new_list(std::move(out));
      }
      if (m == "values" && args.empty()) {
        List out;
        for (const auto& kv : *obj.dict) out.push_back(kv.second);
        return Value::new_list(std::move(out));
      }
      if (m == "get" && !args.empty() && args.size() <= 2) {
        if (args[0].is_string())
          if (const Value* v = obj.find(args[0].s)) return *v;
        return args.size() == 2 ? args[1] : Value::none();
      }
    }
    if (obj.is_undefined()) fail(callee.pos, undefined_message(obj) + " (calling ." + m + "())");
    fail(callee.pos, "unsupported method '" + obj.type_name() + "." + m + "()'");
  }
  fail(e.pos, "unsupported call: only raise_exception(), namespace(), range() and string/dict methods");
}

std::string Renderer::replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;  // Python inserts between characters; templates do not rely on it
  std::string out;
  size_t i = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t j = s.find(from, i);
    if (j == std::string::npos) break;
    out.append(s, i, j - i);
    out += to;
    i = j + from.size();
    if (out.size() > kMaxStringBytes)
      throw TemplateError("chat template: replace()'s result is over the template limit of " +
                          std::to_string(kMaxStringBytes) + " bytes");
  }
  out.append(s, i, std::string::npos);
  return out;
}

Value Renderer::split(const std::string& s, const Value* sep, const SourcePos& p) {
  List out;
  if (!sep || sep->is_none()) {  // runs of whitespace, ends ignored
    const auto cps = code_points(s);
    size_t k = 0;
    while (k < cps.size()) {
      while (k < cps.size() && py_space(cps[k])) ++k;
      const size_t a = k;
      while (k < cps.size() && !py_space(cps[k])) ++k;
      if (k > a) out.push_back(Value::string(from_code_points(cps, a, k)));
    }
    return Value::new_list(std::move(out));
  }
  if (!sep->is_string() || sep->s.empty()) fail(p, "split() separator must be a non-empty string");
  size_t i = 0;
  for (;;) {
    const size_t j = s.find(sep->s, i);
    if (j == std::string::npos) break;
    out.push_back(Value::string(s.substr(i, j - i)));
    i = j + sep->s.size();
  }
  out.push_back(Value::string(s.substr(i)));
  return Value::new_list(std::move(out));
}

const Value* Renderer::kwarg(const Expr& e, const std::string& name, std::vector<Value>& storage) {
  for (const auto& [k, v] : e.kwargs)
    if (k == name) {
      storage.push_back(eval(*v));
      return &storage.back();
    }
  return nullptr;
}

// One function: one branch per Jinja filter name, a dispatch table read top to bottom.
Value Renderer::filter(const Expr& e) {
  const std::string& f = e.name;
  const Value v = eval(*e.a);
  std::vector<Value> args = positional(e);
  std::vector<Value> kw;
  kw.reserve(e.kwargs.size() + 1);
  auto need_string = [&](const char* what) {
    if (v.is_undefined()) return std::string();
    if (!v.is_string()) fail(e.pos, std::string("filter '") + what + "' needs a string, got " + v.type_name());
    return v.s;
  };
  if (f == "trim") return Value::string(py_strip(need_string("trim"), true, true, args.empty() ? nullptr : &args[0]));
  if (f == "upper") return Value::string(py_case(v.str(), 1));
  if (f == "lower") return Value::string(py_case(v.str(), 0));
  if (f == "capitalize") return Value::string(py_case(v.str(), 2));
  if (f == "title") return Value::string(py_case(v.str(), 3));
  if (f == "length" || f == "count") {
    if (v.is_undefined()) return Value::integer(0);
    if (v.is_string()) return Value::integer(static_cast<int64_t>(code_points(v.s).size()));
    if (v.is_list()) return Value::integer(static_cast<int64_t>(v.list->size()));
    if (v.is_dict()) return Value::integer(static_cast<int64_t>(v.dict->size()));
    fail(e.pos, "object of type '" + v.type_name() + "' has no len()");
  }
  if (f == "tojson") {
    const Value* indent = args.empty() ? kwarg(e, "indent", kw) : &args[0];
    int n = -1;
    if (indent && !indent->is_none()) {
      if (!is_int_like(*indent)) fail(e.pos, "tojson indent must be an integer");
      n = static_cast<int>(as_int(*indent));
    }
    try {
      return Value::string(to_json(v, n));
    } catch (const TemplateError& err) {
      fail(e.pos, err.what());
    }
  }
  if (f == "default" || f == "d") {
    const Value dflt = args.empty() ? Value::string("") : args[0];
    const Value* boolean = args.size() > 1 ? &args[1] : kwarg(e, "boolean", kw);
    const bool use_default = v.is_undefined() || (boolean && boolean->truthy() && !v.truthy());
    return use_default ? dflt : v;
  }
  if (f == "join") {
    const Value* sep = args.empty() ? kwarg(e, "d", kw) : &args[0];
    const Value* attr = kwarg(e, "attribute", kw);
    std::string out;
    bool first = true;
    for (const Value& x : iterate(v, e.pos)) {
      if (!first) out += sep ? sep->str() : "";
      first = false;
      out += attr ? attribute(x, attr->str(), e.pos).str() : x.str();
      check_string_size(out.size(), e.pos, "join()'s result");
    }
    return Value::string(out);
  }
  if (f == "list") return Value::new_list(iterate(v, e.pos));
  if (f == "first" || f == "last") {
    List items = iterate(v, e.pos);
    if (items.empty()) return Value::undefined("the " + f + " item of an empty sequence: it");
    return f == "first" ? items.front() : items.back();
  }
  if (f == "string") return Value::string(v.str());
  if (f == "int") {
    if (is_int_like(v)) return Value::integer(as_int(v));
    if (v.kind == Value::Kind::Float) return Value::integer(static_cast<int64_t>(v.f));
    if (v.is_string()) {
      try {
        return Value::integer(std::stoll(v.s));
      } catch (...) {
      }
    }
    return Value::integer(args.empty() ? 0 : as_int(args[0]));
  }
  if (f == "float") {
    if (v.is_number()) return Value::number(as_double(v));
    if (v.is_string()) {
      try {
        return Value::number(std::stod(v.s));
      } catch (...) {
      }
    }
    return Value::number(0.0);
  }
  if (f == "replace") {
    if (args.size() < 2) fail(e.pos, "filter 'replace' needs two arguments");
    return Value::string(replace_all(v.str(), args[0].str(), args[1].str(), args.size() > 2 ? as_int(args[2]) : -1));
  }
  if (f == "items") {
    if (v.is_undefined()) return Value::new_list();
    if (!v.is_dict()) fail(e.pos, "filter 'items' needs a dict, got " + v.type_name());
    List out;
    for (const auto& kv : *v.dict) out.push_back(Value::new_list({Value::string(kv.first), kv.second}));
    return Value::new_list(std::move(out));
  }
  if (f == "safe") return v;
  if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr") {
    const bool by_attr = f == "selectattr" || f == "rejectattr";
    const bool keep_if = f == "select" || f == "selectattr";
    size_t k = 0;
    std::string attr;
    if (by_attr) {
      if (args.empty() || !args[0].is_string()) fail(e.pos, "filter '" + f + "' needs an attribute name");
      attr = args[k++].s;
    }
    std::string test_name;
    if (k < args.size()) {
      if (!args[k].is_string()) fail(e.pos, "filter '" + f + "' needs a test name");
      test_name = args[k++].s;
    }
    const std::vector<Value> test_args(args.begin() + static_cast<std::ptrdiff_t>(k), args.end());
    List out;
    for (const Value& x : iterate(v, e.pos)) {
      const Value subject = by_attr ? attribute(x, attr, e.pos) : x;
      const bool r = test_name.empty() ? subject.truthy() : test(test_name, subject, test_args, e.pos);
      if (r == keep_if) out.push_back(x);
    }
    return Value::new_list(std::move(out));
  }
  if (f == "map") {
    const Value* attr = kwarg(e, "attribute", kw);
    if (!attr) fail(e.pos, "filter 'map' is supported only as map(attribute=...)");
    const Value* dflt = kwarg(e, "default", kw);
    List out;
    for (const Value& x : iterate(v, e.pos)) {
      Value a = attribute(x, attr->str(), e.pos);
      out.push_back(a.is_undefined() && dflt ? *dflt : a);
    }
    return Value::new_list(std::move(out));
  }
  fail(e.pos, "unsupported filter '" + f + "'");
}

bool Renderer::test(const std::string& t, const Value& v, const std::vector<Value>& args, const SourcePos& p) {
  auto need_arg = [&]() -> const Value& {
    if (args.empty()) fail(p, "test '" + t + "' needs an argument");
    return args[0];
  };
  if (t == "defined") return !v.is_undefined();
  if (t == "undefined") return v.is_undefined();
  if (t == "none") return v.is_none();
  if (t == "string") return v.is_string();
  if (t == "number") return v.kind == Value::Kind::Int || v.kind == Value::Kind::Float;
  if (t == "integer") return v.kind == Value::Kind::Int;
  if (t == "float") return v.kind == Value::Kind::Float;
  if (t == "boolean") return v.kind == Value::Kind::Bool;
  if (t == "true") return v.kind == Value::Kind::Bool && v.b;
  if (t == "false") return v.kind == Value::Kind::Bool && !v.b;
  if (t == "mapping") return v.is_dict();
  if (t == "iterable") return v.is_list() || v.is_dict() || v.is_string();
  if (t == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (t == "odd" || t == "even") {
    if (!is_int_like(v)) fail(p, "test '" + t + "' needs an integer");
    return ((as_int(v) % 2 + 2) % 2 == 1) == (t == "odd");
  }
  if (t == "divisibleby") {
    const Value& d = need_arg();
    if (!is_int_like(v) || !is_int_like(d) || as_int(d) == 0) fail(p, "test 'divisibleby' needs integers");
    return as_int(v) % as_int(d) == 0;
  }
  if (t == "eq" || t == "equalto" || t == "==") return equal(v, need_arg());
  if (t == "ne" || t == "!=") return !equal(v, need_arg());
  if (t == "lt" || t == "<") return less(v, need_arg(), p);
  if (t == "gt" || t == ">") return less(need_arg(), v, p);
  if (t == "le" || t == "<=") return !less(need_arg(), v, p);
  if (t == "ge" || t == ">=") return !less(v, need_arg(), p);
  if (t == "in") return contains(need_arg(), v, p);
  if (t == "lower") return v.is_string() && py_case(v.s, 0) == v.s;
  if (t == "upper") return v.is_string() && py_case(v.s, 1) == v.s;
  fail(p, "unsupported test 'is " + t + "'");
}

}  // namespace tpbatch::chat
