#pragma once
// What a row's output must match, as the job or the row gives it: at most one of a JSON Schema,
// any JSON object, a regex, a list of choices (a grammar is refused). Plain data: the job and
// row parsers fill it, constraint.h compiles it.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tpbatch::guided {

struct ConstraintSource {
  std::string json_schema;              // a JSON Schema's text; "" = none
  bool json_object = false;             // any JSON object
  std::optional<std::string> regex;
  std::vector<std::string> choice;      // the output is exactly one of these
  std::optional<std::string> grammar;   // refused: no grammar syntax is supported
  // Bounds where a JSON Schema (or json_object) sets none; 0 = unbounded.
  int64_t max_string_length = 0;        // characters of a JSON string
  int64_t max_items = 0;                // items of an array, members of a free object

  bool any() const { return !json_schema.empty() || json_object || regex || !choice.empty() || grammar; }
  // How many kinds are set (a row or job may set one).
  int kinds() const { return !json_schema.empty() + json_object + regex.has_value() + !choice.empty() + grammar.has_value(); }
};

}  // namespace tpbatch::guided
