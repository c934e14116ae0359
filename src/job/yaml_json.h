#pragma once
// YAML values as JSON and back, for job keys whose values are free-form (chat_template_kwargs):
// typed as JSON reads them, so that the effective job keeps false and "false" apart.
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

namespace tpbatch {

// A YAML value as JSON, typed as JSON (YAML 1.2's core schema) reads its plain scalars: true,
// false, null (~, empty), finite numbers; any other scalar, and every quoted one, is a string.
// Throws std::invalid_argument for a mapping key that is not a scalar, or a duplicate key.
nlohmann::ordered_json yaml_to_json(const YAML::Node& node);

// Writes a JSON value into a YAML emitter as a flow value that yaml_to_json reads back unchanged
// (strings double-quoted, so "false" stays a string).
void emit_json_as_yaml(YAML::Emitter& e, const nlohmann::ordered_json& value);

}  // namespace tpbatch
