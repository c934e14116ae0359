#pragma once
// Reading the keys of a Hugging Face config.json: each value checked for its type and range, every
// message naming the file and the key. config.cpp reads ModelConfig through it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace tpbatch::config_json {

using nlohmann::json;

// How a JSON value's type reads in a message: "an integer", "a string", ...
inline std::string type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// Reads keys of one JSON object, naming the file in every message.
struct Reader {
  const json& obj;
  std::string file;  // e.g. "models/x/config.json"

  [[noreturn]] void fail(const std::string& key, const std::string& why) const {
    throw Error(file + ": key '" + key + "': " + why);
  }
  bool present(const std::string& key) const { return obj.contains(key) && !obj.at(key).is_null(); }

  int64_t integer(const std::string& key) const {
    if (!obj.contains(key)) fail(key, "missing");
    const json& v = obj.at(key);
    if (!v.is_number_integer()) fail(key, "must be an integer, got " + type_name(v) + " (" + v.dump() + ")");
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(key, "out of range (" + v.dump() + ")");
    return v.get<int64_t>();
  }
  int64_t positive(const std::string& key) const {
    int64_t x = integer(key);
    if (x <= 0) fail(key, "must be positive, got " + std::to_string(x));
    return x;
  }
  int64_t positive_or(const std::string& key, int64_t fallback) const {
    return present(key) ? positive(key) : fallback;
  }
  double number(const std::string& key) const {
    if (!obj.contains(key)) fail(key, "missing");
    const json& v = obj.at(key);
    if (!v.is_number()) fail(key, "must be a number, got " + type_name(v) + " (" + v.dump() + ")");
    double x = v.get<double>();
    if (!std::isfinite(x)) fail(key, "must be finite");
    return x;
  }
  double positive_number(const std::string& key) const {
    double x = number(key);
    if (!(x > 0)) fail(key, "must be positive, got " + obj.at(key).dump());
    return x;
  }
  double positive_number_or(const std::string& key, double fallback) const {
    return present(key) ? positive_number(key) : fallback;
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    if (!present(key)) return fallback;
    const json& v = obj.at(key);
    if (!v.is_boolean()) fail(key, "must be true or false, got " + type_name(v) + " (" + v.dump() + ")");
    return v.get<bool>();
  }
  std::string string_or(const std::string& key, const std::string& fallback) const {
    if (!present(key)) return fallback;
    const json& v = obj.at(key);
    if (!v.is_string()) fail(key, "must be a string, got " + type_name(v) + " (" + v.dump() + ")");
    return v.get<std::string>();
  }
  // A token id (or null/absent = none).
  int32_t token_id_or(const std::string& key, int32_t fallback) const {
    if (!present(key)) return fallback;
    int64_t x = integer(key);
    if (x < 0 || x > std::numeric_limits<int32_t>::max()) fail(key, "not a valid token id (" + std::to_string(x) + ")");
    return int32_t(x);
  }
  // An int, a list of ints, or null/absent.
  std::vector<int32_t> token_ids(const std::string& key) const {
    std::vector<int32_t> out;
    if (!present(key)) return out;
    const json& v = obj.at(key);
    auto one = [&](const json& e) {
      if (!e.is_number_integer()) fail(key, "must be an integer or a list of integers, got " + v.dump());
      int64_t x = e.get<int64_t>();
      if (x < 0 || x > std::numeric_limits<int32_t>::max()) fail(key, "not a valid token id (" + e.dump() + ")");
      out.push_back(int32_t(x));
    };
    if (v.is_array()) {
      for (const json& e : v) one(e);
    } else {
      one(v);
    }
    return out;
  }
};

// The object a JSON text holds; Error naming `file` when it is not valid JSON or not an object.
inline json parse_object(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse errors, and numbers that overflow a double
    throw Error(file + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(file + ": must hold a JSON object, got " + type_name(j));
  return j;
}

}  // namespace tpbatch::config_json
