#include "job/yaml_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <stdexcept>

namespace tpbatch {

using ojson = nlohmann::ordered_json;

namespace {

// A plain scalar as YAML 1.2's core schema types it.
ojson plain_scalar(const std::string& s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  static const std::regex integer(R"([-+]?[0-9]+)");
  static const std::regex real(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  int64_t i;
  const char* b = s.data() + (s[0] == '+' ? 1 : 0);
  if (std::regex_match(s, integer) && std::from_chars(b, s.data() + s.size(), i).ec == std::errc()) return i;
  if (std::regex_match(s, real)) {
    const double d = std::strtod(s.c_str(), nullptr);
    if (std::isfinite(d)) return d;
  }
  return s;
}

}  // namespace

ojson yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return node.Tag() == "!" ? ojson(node.Scalar()) : plain_scalar(node.Scalar());
    case YAML::NodeType::Sequence: {
      ojson list = ojson::array();
      for (const auto& e : node) list.push_back(yaml_to_json(e));
      return list;
    }
    case YAML::NodeType::Map: {
      ojson obj = ojson::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) throw std::invalid_argument("a mapping key that is not a plain name");
        const std::string& key = kv.first.Scalar();
        if (obj.contains(key)) throw std::invalid_argument("duplicate key '" + key + "'");
        obj[key] = yaml_to_json(kv.second);
      }
      return obj;
    }
  }
  return nullptr;
}

void emit_json_as_yaml(YAML::Emitter& e, const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::object:
      e << YAML::Flow << YAML::BeginMap;
      for (const auto& [k, x] : v.items()) {
        e << YAML::Key << YAML::DoubleQuoted << k << YAML::Value;
        emit_json_as_yaml(e, x);
      }
      e << YAML::EndMap;
      return;
    case ojson::value_t::array:
      e << YAML::Flow << YAML::BeginSeq;
      for (const auto& x : v) emit_json_as_yaml(e, x);
      e << YAML::EndSeq;
      return;
    case ojson::value_t::string: e << YAML::DoubleQuoted << v.get<std::string>(); return;
    case ojson::value_t::boolean: e << (v.get<bool>() ? "true" : "false"); return;
    case ojson::value_t::null: e << YAML::Null; return;
    default: e << v.dump(); return;  // a number, as JSON writes it
  }
}

}  // namespace tpbatch
