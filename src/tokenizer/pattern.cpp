#include "tokenizer/pattern.h"

namespace tpbatch::tok {

Pattern Pattern::from_json(const Json& v, const JsonPath& at) {
  if (!v.is_object()) at.fail("must be an object {\"String\": ...} or {\"Regex\": ...}");
  Pattern p;
  if (const Json* s = member(v, "String", at)) {
    p.literal_ = as_string(*s, at.child("String"));
  } else if (const Json* r = member(v, "Regex", at)) {
    p.regex_ = std::make_shared<Regex>(as_string(*r, at.child("Regex")), *at.label + ": " + at.path);
  } else {
    at.fail("must hold \"String\" or \"Regex\"");
  }
  return p;
}

std::vector<Span> Pattern::find_matches(std::string_view s) const {
  std::vector<Span> out;
  if (s.empty()) {
    out.push_back({0, 0, false});
    return out;
  }
  size_t prev = 0;
  auto add = [&](size_t a, size_t b) {
    if (prev != a) out.push_back({prev, a, false});
    out.push_back({a, b, true});
    prev = b;
  };
  if (regex_) {
    for (auto [a, b] : regex_->find_all(s)) add(a, b);
  } else if (!literal_.empty()) {
    for (size_t pos = s.find(literal_); pos != std::string_view::npos; pos = s.find(literal_, pos + literal_.size()))
      add(pos, pos + literal_.size());
  }
  if (prev != s.size()) out.push_back({prev, s.size(), false});
  return out;
}

std::string Pattern::replace_all(std::string_view s, std::string_view content) const {
  if (!regex_) {
    if (literal_.empty() || s.find(literal_) == std::string_view::npos) return std::string(s);
  }
  std::string out;
  out.reserve(s.size());
  for (const Span& sp : find_matches(s)) {
    if (sp.is_match) out += content;
    else out += s.substr(sp.start, sp.end - sp.start);
  }
  return out;
}

}  // namespace tpbatch::tok
