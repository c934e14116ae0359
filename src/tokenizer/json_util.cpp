#include "tokenizer/json_util.h"

#include <algorithm>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace tpbatch::tok {

void JsonPath::fail(const std::string& what) const {
  throw Error(*label + ": " + (path.empty() ? "" : path + " ") + what);
}

void JsonPath::check_depth() const {
  if (std::count(path.begin(), path.end(), '.') > 32) fail("nests components too deeply");
}

const Json* member(const Json& obj, const char* key, const JsonPath& at) {
  if (!obj.is_object()) at.fail("must be an object");
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

const Json& require(const Json& obj, const char* key, const JsonPath& at) {
  const Json* v = member(obj, key, at);
  if (!v) at.child(key).fail("is missing");
  return *v;
}

std::string as_string(const Json& v, const JsonPath& at) {
  if (!v.is_string()) at.fail("must be a string");
  return v.get<std::string>();
}

int64_t as_int(const Json& v, const JsonPath& at) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) at.fail("is out of range");
    return static_cast<int64_t>(u);
  }
  at.fail("must be an integer");
}

std::string get_string(const Json& obj, const char* key, const JsonPath& at) {
  return as_string(require(obj, key, at), at.child(key));
}

std::optional<std::string> opt_string(const Json& obj, const char* key, const JsonPath& at) {
  const Json* v = member(obj, key, at);
  if (!v) return std::nullopt;
  return as_string(*v, at.child(key));
}

bool opt_bool(const Json& obj, const char* key, bool def, const JsonPath& at) {
  const Json* v = member(obj, key, at);
  if (!v) return def;
  if (!v->is_boolean()) at.child(key).fail("must be true or false");
  return v->get<bool>();
}

int64_t get_int(const Json& obj, const char* key, const JsonPath& at) {
  return as_int(require(obj, key, at), at.child(key));
}

std::optional<int64_t> opt_int(const Json& obj, const char* key, const JsonPath& at) {
  const Json* v = member(obj, key, at);
  if (!v) return std::nullopt;
  return as_int(*v, at.child(key));
}

const Json& require_array(const Json& obj, const char* key, const JsonPath& at) {
  const Json& v = require(obj, key, at);
  if (!v.is_array()) at.child(key).fail("must be an array");
  return v;
}

uint32_t get_char(const Json& obj, const char* key, const JsonPath& at) {
  std::string s = get_string(obj, key, at);
  size_t n = utf8_valid_len(s, 0);
  if (s.empty() || n != s.size()) at.child(key).fail("must be a single character");
  return utf8_decode(s, 0, n);
}

}  // namespace tpbatch::tok
