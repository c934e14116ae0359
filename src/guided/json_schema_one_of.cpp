#include "guided/json_schema_one_of.h"

#include <algorithm>
#include <cstdint>
#include <memory>

#include "guided/byte_dfa.h"
#include "guided/dfa_intersection.h"

namespace tpbatch::guided {
namespace {

using json = nlohmann::ordered_json;

// An object schema read by its properties: "properties" and at most "type": "object" beside it
// among the keywords that shape the text (a $ref, const, enum, anyOf, oneOf or allOf is read alone).
bool by_properties(const json& s) {
  if (!s.is_object() || !s.contains("properties") || !s["properties"].is_object() || s["properties"].empty())
    return false;
  for (const char* k : {"$ref", "const", "enum", "anyOf", "oneOf", "allOf"})
    if (s.contains(k)) return false;
  return !s.contains("type") || s["type"] == "object";
}

// A schema nothing in it constrains (true, {} or annotations only): it matches every value.
bool admits_anything(const json& s) {
  if (s.is_boolean()) return s.get<bool>();
  for (const char* k : {"type", "properties", "items", "$ref", "const", "enum", "anyOf", "oneOf", "allOf"})
    if (s.contains(k)) return false;
  return true;
}

// An object schema without properties: any members (of the additionalProperties schema, if any).
bool any_object(const json& s) {
  return s.is_object() && s.value("type", json()) == "object" && !by_properties(s) &&
         !(s.contains("additionalProperties") && s["additionalProperties"] == false);
}

// The branches of an anyOf / oneOf read alone (no other keyword shaping the text beside it).
const json* union_branches(const json& s) {
  if (!s.is_object()) return nullptr;
  for (const char* k : {"anyOf", "oneOf"})
    if (auto it = s.find(k); it != s.end() && it->is_array() && !s.contains("$ref") && !s.contains("const") &&
                             !s.contains("enum") && !s.contains("type") && !s.contains("properties"))
      return &*it;
  return nullptr;
}

bool is_array_schema(const json& s) { return s.is_object() && s.value("type", json()) == "array"; }

// The value type a schema's "type" names ("integer" reads as "number": every integer is one), or "".
std::string value_type(const json& s) {
  if (by_properties(s)) return "object";
  if (!s.is_object() || !s.contains("type") || !s["type"].is_string()) return "";
  const std::string t = s["type"].get<std::string>();
  return t == "integer" ? "number" : t;
}

std::vector<std::string> required_of(const json& s) {
  std::vector<std::string> names;
  if (auto it = s.find("required"); it != s.end() && it->is_array())
    for (const json& n : *it)
      if (n.is_string()) names.push_back(n.get<std::string>());
  return names;
}

class OneOfCheck {
 public:
  OneOfCheck(int64_t max_pairs, const SchemaReader& reader, std::string where)
      : max_pairs_(max_pairs), pairs_left_(max_pairs), reader_(reader), where_(std::move(where)) {}

  // The budget is the whole oneOf's, so many branches cannot multiply it.
  CommonString shared_text(ByteDfa& a, ByteDfa& b, size_t i, size_t j) const {
    const CommonString common = shortest_common_string(a, b, pairs_left_);
    pairs_left_ -= common.pairs;
    if (common.outcome == CommonString::kOverBudget)
      refuse(i, j, "are too large to tell apart (over " + std::to_string(max_pairs_) +
                       " automaton state pairs; use anyOf if the branches never overlap)");
    return common;
  }

  // Whether the text check alone may miss a value both match: objects (other properties allowed)
  // and schemas matching anything, at any depth (array items, anyOf / oneOf branches).
  bool reads_values(const json& branch, int depth = 0) const {
    const json& s = reader_.resolved(branch);
    if (admits_anything(s) || by_properties(s) || any_object(s)) return true;
    if (depth > 32) return true;  // a recursive $ref: read as values, so the check stays on the safe side
    if (is_array_schema(s)) return !s.contains("items") || reads_values(s["items"], depth + 1);
    if (const json* u = union_branches(s))
      for (const json& b : *u)
        if (reads_values(b, depth + 1)) return true;
    return false;
  }

  // Whether no output of `a` is matched by `b` as JSON Schema reads b (other properties allowed).
  // Where it cannot tell, it answers false (the oneOf is refused).
  bool excludes(const json& a_in, const json& b_in, size_t i, size_t j, int depth = 0) const {
    const json& a = reader_.resolved(a_in);
    const json& b = reader_.resolved(b_in);
    if (admits_anything(b) || depth > 32) return false;
    if (const json* u = union_branches(a)) {  // a writes one of its branches: each must be excluded
      for (const json& branch : *u)
        if (!excludes(branch, b, i, j, depth + 1)) return false;
      return true;
    }
    if (const json* u = union_branches(b)) {  // b matches through any of its branches
      for (const json& branch : *u)
        if (!excludes(a, branch, i, j, depth + 1)) return false;
      return true;
    }
    if (!reads_values(a) && !reads_values(b)) {  // scalars, and arrays of them: the text decides
      ByteDfa da(compile_regex(reader_.regex(a))), db(compile_regex(reader_.regex(b)));
      return shared_text(da, db, i, j).outcome == CommonString::kNone;
    }
    const std::string ta = value_type(a), tb = value_type(b);
    if (!ta.empty() && !tb.empty() && ta != tb) return true;  // an object is never an array, a string, ...
    if (any_object(b) && (by_properties(a) || any_object(a))) return false;
    if (by_properties(a) && by_properties(b)) return objects_apart(a, b, i, j, depth);
    if (is_array_schema(a) && is_array_schema(b)) return arrays_apart(a, b, i, j, depth);
    return false;
  }

  // Two arrays: their length bounds never meet, or every array a writes holds an item and no item
  // a writes is matched by b's items.
  bool arrays_apart(const json& a, const json& b, size_t i, size_t j, int depth) const {
    auto bound = [](const json& s, const char* k, int64_t none) {
      auto it = s.find(k);
      return it != s.end() && it->is_number_integer() ? it->get<int64_t>() : none;
    };
    const int64_t lo = std::max(bound(a, "minItems", 0), bound(b, "minItems", 0));
    const int64_t hi = std::min(bound(a, "maxItems", INT64_MAX), bound(b, "maxItems", INT64_MAX));
    if (lo > hi) return true;
    if (lo == 0 || !a.contains("items") || !b.contains("items")) return false;  // [] matches both
    return excludes(a["items"], b["items"], i, j, depth + 1);
  }

  // Two objects read by their properties: b requires one a never writes, or a always writes one
  // b does not allow, or one a always writes has values b's schema for it excludes.
  bool objects_apart(const json& a, const json& b, size_t i, size_t j, int depth) const {
    const json& props_a = a.at("properties");
    const json& props_b = b.at("properties");
    for (const std::string& k : required_of(b))
      if (!props_a.contains(k)) return true;
    const bool closed_b = b.contains("additionalProperties") && b.at("additionalProperties") == false;
    for (const std::string& k : required_of(a)) {
      if (!props_b.contains(k)) {
        if (closed_b) return true;
        continue;
      }
      if (props_a.contains(k) && excludes(props_a.at(k), props_b.at(k), i, j, depth + 1)) return true;
    }
    return false;
  }

  [[noreturn]] void refuse(size_t i, size_t j, const std::string& why) const {
    throw GuidedError("oneOf at #" + where_ + ": branches " + std::to_string(std::min(i, j)) + " and " +
                      std::to_string(std::max(i, j)) + " " + why);
  }

 private:
  int64_t max_pairs_;
  mutable int64_t pairs_left_;
  const SchemaReader& reader_;
  std::string where_;
};

std::string shown(const std::string& text) {
  return json(text).dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace

void check_one_of_branches(const json& branches, const std::vector<std::string>& regexes, const std::string& where,
                           int64_t max_pairs, const SchemaReader& reader) {
  const OneOfCheck check(max_pairs, reader, where);
  std::vector<std::unique_ptr<ByteDfa>> dfas;
  for (const std::string& r : regexes) dfas.push_back(std::make_unique<ByteDfa>(compile_regex(r)));
  for (size_t i = 0; i < regexes.size(); ++i)
    for (size_t j = i + 1; j < regexes.size(); ++j) {
      const CommonString common = check.shared_text(*dfas[i], *dfas[j], i, j);
      if (common.outcome == CommonString::kFound)
        check.refuse(i, j, "both admit " + shown(common.text) +
                               " (oneOf needs branches no value matches twice; use anyOf if that is meant)");
      // Apart as text; as values too where a branch writes objects or matches anything.
      if (check.reads_values(branches[i]) || check.reads_values(branches[j]))
        if (!check.excludes(branches[i], branches[j], i, j) || !check.excludes(branches[j], branches[i], j, i))
          check.refuse(i, j, "may both match one value: JSON Schema lets an object hold properties its schema does "
                           "not list, and no required property tells these apart (oneOf needs branches no value "
                           "matches twice: require in each a property the other lacks or gives other values, "
                           "or use anyOf if that is meant)");
    }
}

}  // namespace tpbatch::guided
