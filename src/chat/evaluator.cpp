#include "chat/evaluator.h"

#include "tokenizer/utf8.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

namespace tpbatch::chat {
namespace {

// ---- limits ------------------------------------------------------------------------------------
// A template may not take unbounded memory or time (one row's template would end the whole job):
// range() as jinja2's sandbox bounds it (MAX_RANGE), every string a template builds and its
// rendering at 16 MiB (far past any context), and the loop iterations of one rendering.
constexpr int64_t kMaxRange = 100000;
constexpr size_t kMaxStringBytes = size_t{16} << 20;
constexpr int64_t kMaxLoopIterations = 1'000'000;

void check_string_size(size_t bytes, const SourcePos& p, const std::string& what) {
  if (bytes > kMaxStringBytes)
    fail(p, what + " would be " + std::to_string(bytes) + " bytes, over the template limit of " +
                std::to_string(kMaxStringBytes) + " bytes");
}

// ---- Python str helpers, by code point -------------------------------------------------------

// The tokenizer's decoder; a byte that starts no valid sequence stands for itself (as Latin-1).
std::vector<uint32_t> code_points(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const size_t len = tok::utf8_valid_len(s, i);
    out.push_back(len ? tok::utf8_decode(s, i, len) : static_cast<unsigned char>(s[i]));
    i += len ? len : 1;
  }
  return out;
}

std::string from_code_points(const std::vector<uint32_t>& cps, size_t from = 0, size_t to = SIZE_MAX) {
  std::string out;
  for (size_t k = from; k < std::min(to, cps.size()); ++k) tok::utf8_append(out, cps[k]);
  return out;
}

// Python's str.isspace().
bool py_space(uint32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f ||
         c == 0x205f || c == 0x3000;
}

// str.strip / lstrip / rstrip with optional characters (None: whitespace).
std::string py_strip(const std::string& s, bool left, bool right, const Value* chars) {
  const std::vector<uint32_t> cps = code_points(s);
  std::vector<uint32_t> set;
  if (chars && chars->is_string()) set = code_points(chars->s);
  auto strip_me = [&](uint32_t c) {
    return chars && chars->is_string() ? std::find(set.begin(), set.end(), c) != set.end() : py_space(c);
  };
  size_t a = 0, b = cps.size();
  if (left)
    while (a < b && strip_me(cps[a])) ++a;
  if (right)
    while (b > a && strip_me(cps[b - 1])) --b;
  return from_code_points(cps, a, b);
}

std::string py_case(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 capitalize, 3 title
  std::string out = s;
  bool word_start = true;
  for (size_t k = 0; k < out.size(); ++k) {
    char& c = out[k];
    if (static_cast<unsigned char>(c) >= 0x80) {
      word_start = false;
      continue;  // ASCII case mapping only
    }
    const bool alpha = std::isalpha(static_cast<unsigned char>(c));
    if (mode == 0) c = static_cast<char>(std::tolower(c));
    else if (mode == 1) c = static_cast<char>(std::toupper(c));
    else if (mode == 2) c = static_cast<char>(k == 0 ? std::toupper(c) : std::tolower(c));
    else c = static_cast<char>(word_start ? std::toupper(c) : std::tolower(c));
    word_start = !alpha;
  }
  return out;
}

double as_double(const Value& v) {
  return v.kind == Value::Kind::Float ? v.f : v.kind == Value::Kind::Bool ? (v.b ? 1.0 : 0.0) : static_cast<double>(v.i);
}
bool is_int_like(const Value& v) { return v.kind == Value::Kind::Int || v.kind == Value::Kind::Bool; }
int64_t as_int(const Value& v) { return v.kind == Value::Kind::Bool ? (v.b ? 1 : 0) : v.i; }

// Python slice indices for a sequence of length n.
std::vector<size_t> slice_indices(int64_t n, const Value* start, const Value* stop, const Value* step,
                                  const SourcePos& p) {
  int64_t st = 1;
  if (step && !step->is_none()) {
    if (!is_int_like(*step)) fail(p, "slice step must be an integer");
    st = as_int(*step);
    if (st == 0) fail(p, "slice step cannot be zero");
  }
  auto norm = [&](const Value* v, int64_t dflt, bool is_start) -> int64_t {
    if (!v || v->is_none()) return dflt;
    if (!is_int_like(*v)) fail(p, "slice indices must be integers");
    int64_t x = as_int(*v);
    if (x < 0) x += n;
    if (st > 0) return std::clamp<int64_t>(x, 0, n);
    (void)is_start;
    return std::clamp<int64_t>(x, -1, n - 1);
  };
  const int64_t a = norm(start, st > 0 ? 0 : n - 1, true);
  const int64_t b = norm(stop, st > 0 ? n : -1, false);
  std::vector<size_t> out;
  if (st > 0)
    for (int64_t k = a; k < b; k += st) out.push_back(static_cast<size_t>(k));
  else
    for (int64_t k = a; k > b; k += st) out.push_back(static_cast<size_t>(k));
  return out;
}

struct BreakLoop {};
struct ContinueLoop {};

class Renderer {
 public:
  explicit Renderer(const Dict& globals) { scopes_.push_back(globals); }

  void run(const Body& body, std::string& out) {
    for (const auto& s : body) exec(*s, out);
  }

 private:
  // ---- scopes ----
  const Value* lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      for (const auto& kv : *it)
        if (kv.first == name) return &kv.second;
    return nullptr;
  }
  void assign(const std::string& name, Value v) {
    for (auto& kv : scopes_.back())
      if (kv.first == name) {
        kv.second = std::move(v);
        return;
      }
    scopes_.back().emplace_back(name, std::move(v));
  }

  // ---- statements ----
  void exec(const Stmt& s, std::string& out) {
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

  List iterate(const Value& v, const SourcePos& p) {
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

  void bind_targets(const Stmt& s, const Value& item) {
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

  void exec_for(const Stmt& s, std::string& out) {
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
  Value eval(const Expr& e) {
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

  static std::string undefined_message(const Value& v) {
    return v.undefined_name.empty() ? "a value is undefined" : "'" + v.undefined_name + "' is undefined";
  }

  Value attribute(const Value& obj, const std::string& name, const SourcePos& p) {
    if (obj.is_undefined()) fail(p, undefined_message(obj) + " (reading ." + name + ")");
    if (obj.is_dict()) {
      if (const Value* v = obj.find(name)) return *v;
    }
    return Value::undefined(obj.type_name() + " object has no attribute '" + name + "': it");
  }

  Value item(const Value& obj, const Value& key, const SourcePos& p) {
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

  std::vector<Value> positional(const Expr& e) {
    std::vector<Value> out;
    for (const auto& a : e.args) out.push_back(eval(*a));
    return out;
  }

  Value call(const Expr& e) {
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

  static std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
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

  static Value split(const std::string& s, const Value* sep, const SourcePos& p) {
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

  const Value* kwarg(const Expr& e, const std::string& name, std::vector<Value>& storage) {
    for (const auto& [k, v] : e.kwargs)
      if (k == name) {
        storage.push_back(eval(*v));
        return &storage.back();
      }
    return nullptr;
  }

  Value filter(const Expr& e) {
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

  bool test(const std::string& t, const Value& v, const std::vector<Value>& args, const SourcePos& p) {
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

  static bool less(const Value& a, const Value& b, const SourcePos& p) {
    if (a.is_number() && b.is_number()) return as_double(a) < as_double(b);
    if (a.is_string() && b.is_string()) return a.s < b.s;  // UTF-8 byte order = code point order
    fail(p, "'<' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'");
  }

  static bool contains(const Value& container, const Value& x, const SourcePos& p) {
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

  Value binary(const Expr& e) {
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

  std::vector<Dict> scopes_;
  int64_t iterations_ = 0;  // loop iterations of this rendering (kMaxLoopIterations)
};

}  // namespace

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
