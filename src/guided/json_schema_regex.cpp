#include "guided/json_schema_regex.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "guided/json_schema_one_of.h"
#include "guided/regex_nfa.h"

namespace tpbatch::guided {
namespace {

using json = nlohmann::ordered_json;

// A JSON string's characters: anything but '"', '\\' and control characters, or an escape.
constexpr const char* kStringChar = R"((?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}))";
// Digits are bounded so a model cannot write a number forever (a double has 17 significant digits).
constexpr const char* kNonNegativeInteger = "(?:0|[1-9][0-9]{0,15})";
constexpr const char* kFraction = R"((?:\.[0-9]{1,16})?(?:[eE][+-]?[0-9]{1,3})?)";
constexpr int kFreeValueDepth = 2;  // how deep a value a schema leaves free may nest
constexpr size_t kMaxRegexBytes = size_t{1} << 22;

std::string repeat(const std::string& atom, int64_t min, int64_t max) {
  return "(?:" + atom + "){" + std::to_string(min) + "," + (max < 0 ? "" : std::to_string(max)) + "}";
}

// "(?:first(?:,rest){min-1,max-1})?" shapes: a comma-separated list of min..max items.
std::string list_of(const std::string& item, int64_t min, int64_t max) {
  if (max == 0) return "";
  const std::string rest = repeat("," + item, std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1);
  const std::string some = item + rest;
  return min == 0 ? "(?:" + some + ")?" : some;
}

// A const or enum value as this engine writes it: a number with an integral value (1.0, -0.0,
// 1e2) as an integer, so the text is one per JSON value (JSON Schema reads 1.0 and 1 as the same
// number: oneOf's check compares the texts two branches write).
json canonical_numbers(json v) {
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) <= 9007199254740992.0) return json(int64_t(d));
  } else if (v.is_structured()) {
    for (auto& e : v) e = canonical_numbers(e);
  }
  return v;
}

std::string literal(const json& v) { return regex_escape(canonical_numbers(v).dump()); }

class SchemaRegex {
 public:
  SchemaRegex(const json& root, const ConstraintSource& b, int64_t max_one_of_pairs = kMaxOneOfPairs)
      : root_(root), b_(b), max_one_of_pairs_(max_one_of_pairs) {}

  std::string value(const json& s, const std::string& where) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail(where, "false", "a schema that admits nothing");
      return free_value(kFreeValueDepth);
    }
    if (!s.is_object()) fail(where, "", "a schema must be an object or a boolean");
    static const std::set<std::string> annotations = {
        "title", "description", "default", "examples", "$schema", "$id", "id", "$comment", "readOnly",
        "writeOnly", "deprecated", "additionalProperties", "definitions", "$defs", "required"};
    static const std::set<std::string> handled = {
        "type", "properties", "items", "minItems", "maxItems", "enum", "const", "anyOf", "oneOf", "allOf", "$ref",
        "minLength", "maxLength", "pattern", "format", "minimum", "exclusiveMinimum"};
    for (const auto& kv : s.items())
      if (!annotations.count(kv.key()) && !handled.count(kv.key()))
        fail(where, kv.key(), "is not supported");
    if (auto it = s.find("$ref"); it != s.end()) return ref(*it, where);
    if (auto it = s.find("const"); it != s.end()) return literal(*it);
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) fail(where, "enum", "must be a non-empty list");
      std::string alt;
      for (const auto& v : *it) alt += (alt.empty() ? "" : "|") + literal(v);
      return "(?:" + alt + ")";
    }
    if (auto it = s.find("anyOf"); it != s.end()) return alternatives(*it, where + "/anyOf", "anyOf");
    if (auto it = s.find("oneOf"); it != s.end()) return one_of(*it, where + "/oneOf", where);
    if (auto it = s.find("allOf"); it != s.end()) {
      if (!it->is_array() || it->size() != 1) fail(where, "allOf", "is supported with one schema only");
      return value((*it)[0], where + "/allOf/0");
    }
    const json* type = s.contains("type") ? &s["type"] : nullptr;
    if (!type) {
      if (s.contains("properties")) return object(s, where);
      if (s.contains("items")) return array(s, where);
      return free_value(kFreeValueDepth);
    }
    if (type->is_array()) {
      std::string alt;
      for (const auto& t : *type) alt += (alt.empty() ? "" : "|") + typed(s, t, where);
      return "(?:" + alt + ")";
    }
    return typed(s, *type, where);
  }

 private:
  [[noreturn]] void fail(const std::string& where, const std::string& keyword, const std::string& why) const {
    const std::string at = "#" + where;
    if (keyword.empty()) throw GuidedError("JSON Schema at " + at + ": " + why);
    throw GuidedError("JSON Schema keyword '" + keyword + "' at " + at + " " + why);
  }

  std::vector<std::string> branches(const json& list, const std::string& where, const char* keyword) {
    if (!list.is_array() || list.empty()) fail(where, keyword, "must be a non-empty list");
    std::vector<std::string> out;
    for (size_t i = 0; i < list.size(); ++i) out.push_back(value(list[i], where + "/" + std::to_string(i)));
    return out;
  }

  static std::string either(const std::vector<std::string>& alts) {
    std::string alt;
    for (const std::string& a : alts) alt += (alt.empty() ? "" : "|") + a;
    return "(?:" + alt + ")";
  }

  std::string alternatives(const json& list, const std::string& where, const char* keyword) {
    return either(branches(list, where, keyword));
  }

  // Exactly one branch matching: branches no value matches twice (json_schema_one_of.h), as
  // alternatives.
  std::string one_of(const json& list, const std::string& where, const std::string& at) {
    const std::vector<std::string> alts = branches(list, where, "oneOf");
    SchemaReader reader;
    reader.resolved = [this, where](const json& s) -> const json& { return resolved(s, where); };
    reader.regex = [this, where](const json& s) { return value(s, where); };
    check_one_of_branches(list, alts, at, max_one_of_pairs_, reader);
    return either(alts);
  }

  // The schema behind top-level $refs and one-element allOfs.
  const json& resolved(const json& s, const std::string& where) {
    const json* at = &s;
    for (int hops = 0; at->is_object() && hops < 64; ++hops) {
      if (auto r = at->find("$ref"); r != at->end() && r->is_string()) at = &ref_target(r->get<std::string>(), where);
      else if (auto a = at->find("allOf"); a != at->end() && a->is_array() && a->size() == 1) at = &(*a)[0];
      else break;
    }
    return *at;
  }

  const json& ref_target(const std::string& path, const std::string& where) {
    if (path == "#") return root_;
    for (const char* folder : {"definitions", "$defs"}) {
      const std::string prefix = std::string("#/") + folder + "/";
      if (path.rfind(prefix, 0) != 0) continue;
      auto defs = root_.find(folder);
      if (defs == root_.end() || !defs->is_object() || !defs->contains(path.substr(prefix.size())))
        fail(where, "$ref", "'" + path + "' names nothing");
      return defs->at(path.substr(prefix.size()));
    }
    fail(where, "$ref", "'" + path + "' is not a local definition (#/definitions/... or #/$defs/...)");
  }

  std::string ref(const json& r, const std::string& where) {
    if (!r.is_string()) fail(where, "$ref", "must be a string");
    const std::string path = r.get<std::string>();
    if (std::find(stack_.begin(), stack_.end(), path) != stack_.end())
      fail(where, "$ref", "to '" + path + "' is recursive, which is not supported");
    const json* target = &ref_target(path, where);
    stack_.push_back(path);
    std::string out = value(*target, path.substr(1));
    stack_.pop_back();
    expanded_ += out.size();  // $refs used many times can multiply a schema's size
    if (expanded_ > kMaxRegexBytes) fail(where, "$ref", "expands the schema past " + std::to_string(kMaxRegexBytes) + " bytes");
    return out;
  }

  std::string typed(const json& s, const json& type, const std::string& where) {
    if (!type.is_string()) fail(where, "type", "must be a string or a list of strings");
    const std::string t = type.get<std::string>();
    if (t == "object") return object(s, where);
    if (t == "array") return array(s, where);
    if (t == "string") return string(s, where);
    if (t == "integer") return integer(s, where);
    if (t == "number") return number(s, where);
    if (t == "boolean") return "(?:true|false)";
    if (t == "null") return "null";
    fail(where, "type", "'" + t + "' is not a JSON Schema type");
  }

  std::string object(const json& s, const std::string& where) {
    auto props = s.find("properties");
    if (props == s.end() || !props->is_object() || props->empty()) {
      if (auto r = s.find("required"); r != s.end() && !(r->is_array() && r->empty()))
        fail(where, "required", "needs the properties it names in properties");
      auto extra = s.find("additionalProperties");  // a map: each member's value follows this schema
      if (extra != s.end() && extra->is_boolean() && !extra->get<bool>()) return R"(\{\})";
      if (extra == s.end() || !extra->is_object()) return free_object(kFreeValueDepth);
      const std::string member = free_string() + ":" + value(*extra, where + "/additionalProperties");
      return R"(\{)" + list_of(member, 0, b_.max_items > 0 ? b_.max_items : -1) + R"(\})";
    }
    const std::set<std::string> required = required_names(s, *props, where);
    std::vector<std::string> members;
    std::vector<bool> optional;
    for (const auto& kv : props->items()) {
      members.push_back(regex_escape(json(kv.key()).dump()) + ":" + value(kv.value(), where + "/properties/" + kv.key()));
      optional.push_back(!required.count(kv.key()));
    }
    return R"(\{)" + present_members(members, optional) + R"(\})";
  }

  std::set<std::string> required_names(const json& s, const json& props, const std::string& where) const {
    std::set<std::string> names;
    auto it = s.find("required");
    if (it == s.end()) return names;
    if (!it->is_array()) fail(where, "required", "must be a list of property names");
    for (const json& name : *it) {
      if (!name.is_string()) fail(where, "required", "must be a list of property names");
      if (!props.contains(name.get<std::string>()))
        fail(where, "required", "names '" + name.get<std::string>() + "', which is not in properties");
      names.insert(name.get<std::string>());
    }
    return names;
  }

  // The members present, in the schema's order: every required one and any subset of the
  // optional ones, comma-separated. One alternative per member that can come first (those
  // before it are optional and absent): that member, then each later one as ",m" or "(?:,m)?".
  // O(n^2) in the members, where listing the subsets would be O(2^n).
  static std::string present_members(const std::vector<std::string>& members, const std::vector<bool>& optional) {
    std::vector<std::string> after(members.size() + 1);  // after[k]: members k.. once one was written
    for (size_t k = members.size(); k-- > 0;)
      after[k] = (optional[k] ? "(?:," + members[k] + ")?" : "," + members[k]) + after[k + 1];
    std::vector<std::string> firsts;
    for (size_t k = 0; k < members.size(); ++k) {
      firsts.push_back(members[k] + after[k + 1]);
      if (!optional[k]) break;
    }
    if (firsts.size() == members.size() && optional.back()) return either(firsts) + "?";  // {} too
    return firsts.size() == 1 ? firsts[0] : either(firsts);
  }

  std::string array(const json& s, const std::string& where) {
    const int64_t min = bound(s, "minItems", where, 0);
    int64_t max = bound(s, "maxItems", where, -1);
    if (max < 0 && b_.max_items > 0) max = std::max(min, b_.max_items);
    auto items = s.find("items");
    if (items != s.end() && items->is_array()) fail(where, "items", "as a list (tuple validation) is not supported");
    const std::string item = items == s.end() ? free_value(kFreeValueDepth) : value(*items, where + "/items");
    return R"(\[)" + list_of(item, min, max) + R"(\])";
  }

  int64_t bound(const json& s, const char* key, const std::string& where, int64_t absent) const {
    auto it = s.find(key);
    if (it == s.end()) return absent;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 10000)
      fail(where, key, "must be an integer in [0, 10000]");
    return it->get<int64_t>();
  }

  std::string string(const json& s, const std::string& where) {
    if (auto f = s.find("format"); f != s.end()) {
      static const std::map<std::string, std::string> formats = {
          {"date-time", R"([0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"},
          {"date", R"([0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8]))"},
          {"time", R"((?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))"},
          {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
          {"email", R"([a-zA-Z0-9][a-zA-Z0-9._+-]{0,30}@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?(?:\.[a-zA-Z]{2,10}){1,2})"},
          {"ipv4", R"((?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9]))"}};
      const auto it = f->is_string() ? formats.find(f->get<std::string>()) : formats.end();
      if (it == formats.end()) fail(where, "format", "'" + f->dump() + "' is not supported (date-time, date, time, uuid)");
      return "\"" + it->second + "\"";
    }
    const int64_t min = bound(s, "minLength", where, 0);
    int64_t max = bound(s, "maxLength", where, -1);
    if (max < 0 && b_.max_string_length > 0) max = std::max(min, b_.max_string_length);
    if (auto p = s.find("pattern"); p != s.end()) return pattern_string(s, *p, min, max, where);
    return "\"" + repeat(kStringChar, min, max) + "\"";
  }

  // A string whose characters follow `pattern`. The pattern may not admit what a JSON string must
  // escape ('"', '\\', control characters). Length bounds apply where the pattern is one repeated
  // character class (`[a-f0-9]+`, `\\d*`): its repeat becomes {min,max}; with another pattern
  // they are refused.
  std::string pattern_string(const json& s, const json& p, int64_t min, int64_t max, const std::string& where) {
    if (!p.is_string()) fail(where, "pattern", "must be a string");
    std::string pat = p.get<std::string>();
    if (!pat.empty() && pat.front() == '^') pat.erase(0, 1);
    if (!pat.empty() && pat.back() == '$' && (pat.size() < 2 || pat[pat.size() - 2] != '\\')) pat.pop_back();
    Nfa nfa;
    try {
      nfa = compile_regex(pat);
    } catch (const GuidedError& e) {
      fail(where, "pattern", std::string("cannot be used: ") + e.what());
    }
    for (const Nfa::State& st : nfa.states)
      for (const ByteEdge& e : st.edges)
        if (e.lo < 0x20 || (e.lo <= '"' && e.hi >= '"') || (e.lo <= '\\' && e.hi >= '\\'))
          fail(where, "pattern", "admits a character a JSON string must escape ('\"', '\\\\' or a control character), "
               "which is not supported");
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (const std::string atom = repeated_atom(pat); !atom.empty() && (lengths || max >= 0)) {
      const int64_t lo = std::max<int64_t>(min, pat.back() == '+' ? 1 : 0);
      if (max >= 0 && max < lo) fail(where, "maxLength", "admits no string of the pattern");
      return "\"" + repeat(atom, lo, max) + "\"";
    }
    if (lengths) fail(where, s.contains("minLength") ? "minLength" : "maxLength", "together with this pattern is not supported");
    return "\"(?:" + pat + ")\"";
  }

  // "X" when the pattern is X+ or X* for one class [..], one escape \\d, or '.'; else "".
  static std::string repeated_atom(const std::string& pat) {
    if (pat.size() < 2 || (pat.back() != '+' && pat.back() != '*')) return "";
    const std::string atom = pat.substr(0, pat.size() - 1);
    if (atom == "." || (atom.size() == 2 && atom[0] == '\\')) return atom;
    if (atom.front() != '[' || atom.back() != ']') return "";
    for (size_t i = 1; i + 1 < atom.size(); ++i) {
      if (atom[i] == '\\') ++i;
      else if (atom[i] == ']' && i > 1) return "";  // two classes
    }
    return atom;
  }

  // minimum / exclusiveMinimum: the few values a sign and a first digit can say.
  std::string integer(const json& s, const std::string& where) {
    for (const char* k : {"minimum", "exclusiveMinimum"}) {
      auto it = s.find(k);
      if (it == s.end()) continue;
      const double lo = it->is_number() ? it->get<double>() : -1;
      const bool exclusive = k[0] == 'e';
      if (lo == 0 && !exclusive) return kNonNegativeInteger;
      if ((lo == 0 && exclusive) || (lo == 1 && !exclusive)) return "[1-9][0-9]{0,15}";
      fail(where, k, "is supported only as minimum 0 or 1, or exclusiveMinimum 0");
    }
    return std::string("-?") + kNonNegativeInteger;
  }

  std::string number(const json& s, const std::string& where) {
    if (s.contains("exclusiveMinimum")) fail(where, "exclusiveMinimum", "is not supported on numbers");
    if (auto it = s.find("minimum"); it != s.end()) {
      if (!(it->is_number() && it->get<double>() == 0)) fail(where, "minimum", "is supported on numbers only as 0");
      return std::string(kNonNegativeInteger) + kFraction;
    }
    return std::string("-?") + kNonNegativeInteger + kFraction;
  }

  std::string free_string() const {
    return "\"" + repeat(kStringChar, 0, b_.max_string_length > 0 ? b_.max_string_length : -1) + "\"";
  }
  std::string free_object(int depth) const {
    const std::string member = free_string() + ":" + free_value(depth - 1);
    return R"(\{)" + list_of(member, 0, b_.max_items > 0 ? b_.max_items : -1) + R"(\})";
  }
  std::string free_value(int depth) const {
    std::string alt = free_string() + "|-?" + kNonNegativeInteger + kFraction + "|true|false|null";
    if (depth > 0) {
      alt += "|" + free_object(depth);
      alt += R"(|\[)" + list_of(free_value(depth - 1), 0, b_.max_items > 0 ? b_.max_items : -1) + R"(\])";
    }
    return "(?:" + alt + ")";
  }

  friend std::string tpbatch::guided::json_object_regex(const ConstraintSource&);
  const json& root_;
  const ConstraintSource& b_;
  const int64_t max_one_of_pairs_;
  std::vector<std::string> stack_;  // the $refs being expanded
  size_t expanded_ = 0;             // bytes of regex the $refs have written so far
};

}  // namespace

std::string json_schema_regex(std::string_view schema_text, const ConstraintSource& bounds, int64_t max_one_of_pairs) {
  json root;
  try {
    root = json::parse(schema_text);
  } catch (const json::exception& e) {
    throw GuidedError(std::string("the JSON Schema is not valid JSON: ") + e.what());
  }
  SchemaRegex s(root, bounds, max_one_of_pairs);
  return s.value(root, "");
}

std::string json_object_regex(const ConstraintSource& bounds) {
  const json empty = json::object();
  return SchemaRegex(empty, bounds).free_object(kFreeValueDepth + 1);
}

}  // namespace tpbatch::guided
