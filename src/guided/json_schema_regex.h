#pragma once
// A JSON Schema as a regex over its compact JSON text (no whitespace between tokens), as outlines
// builds one. The subset: type (one or a list), properties (written in the schema's order; those
// not in `required` may be left out), required, items, minItems/maxItems, enum, const, anyOf,
// oneOf (branches no value matches twice, else refused: json_schema_one_of.h), a one-element allOf, $ref to "#",
// "#/definitions/..." or "#/$defs/...", minLength/maxLength, pattern, format (date-time, date,
// time, uuid, email, ipv4), minimum/exclusiveMinimum of 0 or 1 on integers and minimum 0 on
// numbers. Annotations (title, description, default, examples, $schema, $id, $comment, readOnly,
// writeOnly, deprecated) are read past; additionalProperties is read for an object without
// properties. Any other keyword throws GuidedError naming it and where it is.
#include <cstdint>
#include <string>
#include <string_view>

#include "guided/constraint_source.h"

namespace tpbatch::guided {

// How many pairs of automaton states the check of one oneOf's branches may visit, all pairs of
// branches together.
constexpr int64_t kMaxOneOfPairs = 200'000;

// schema_text: the schema as JSON text. Bounds: source.max_string_length, source.max_items.
std::string json_schema_regex(std::string_view schema_text, const ConstraintSource& bounds,
                              int64_t max_one_of_pairs = kMaxOneOfPairs);

// Any JSON object (nested up to a few levels), compact.
std::string json_object_regex(const ConstraintSource& bounds);

}  // namespace tpbatch::guided
