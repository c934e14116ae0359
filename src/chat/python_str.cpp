#include "chat/python_str.h"

#include <algorithm>
#include <cmath>

#include "tokenizer/utf8.h"

namespace tpbatch::chat {

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

std::string from_code_points(const std::vector<uint32_t>& cps, size_t from, size_t to) {
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

}  // namespace tpbatch::chat
