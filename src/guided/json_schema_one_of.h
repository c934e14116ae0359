#pragma once
// JSON Schema's oneOf holds when exactly one branch matches. The translation writes a oneOf as
// the alternatives of its branches once it has checked that no output of one branch is matched by
// another, and refuses the schema otherwise:
//  - no text two branches write alike: the product of their automata has no pair of accepting
//    states (the refusal names a shortest shared text);
//  - objects: JSON Schema lets an object hold properties its schema does not list, in any order,
//    so an object one branch writes may match another branch whose text it is not. Two branches
//    writing objects must be told apart by a property: one requires a property the other never
//    writes, or both write a required property with values that are themselves told apart.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tpbatch::guided {

// What the check needs of the translation.
struct SchemaReader {
  // The schema a branch stands for once its top-level $ref / one-element allOf are followed.
  std::function<const nlohmann::ordered_json&(const nlohmann::ordered_json&)> resolved;
  // The regex of a schema's compact JSON text.
  std::function<std::string(const nlohmann::ordered_json&)> regex;
};

// Throws GuidedError ("oneOf at #/where: branches i and j ...") when two branches may both match
// one value. `regexes`: the branches' regexes, as the translation wrote them.
void check_one_of_branches(const nlohmann::ordered_json& branches, const std::vector<std::string>& regexes,
                           const std::string& where, int64_t max_pairs, const SchemaReader& reader);

}  // namespace tpbatch::guided
