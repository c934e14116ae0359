#pragma once
// Checked access to tokenizer.json values: every wrong type or missing key throws tpbatch::Error
// "<label>: <path> ...". Nothing here lets a malformed file crash the reader.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tpbatch::tok {

using Json = nlohmann::json;

// Where a value sits: the file label and the JSON path, for error messages.
struct JsonPath {
  const std::string* label;
  std::string path;
  JsonPath child(const std::string& key) const { return {label, path.empty() ? key : path + "." + key}; }
  JsonPath index(size_t i) const { return {label, path + "[" + std::to_string(i) + "]"}; }
  [[noreturn]] void fail(const std::string& what) const;
  // Fails when components nest deeper than a real file ever does (guards the recursion).
  void check_depth() const;
};

// The member, or nullptr when absent or null. Fails when `obj` is not an object.
const Json* member(const Json& obj, const char* key, const JsonPath& at);
const Json& require(const Json& obj, const char* key, const JsonPath& at);
std::string get_string(const Json& obj, const char* key, const JsonPath& at);
std::optional<std::string> opt_string(const Json& obj, const char* key, const JsonPath& at);
bool opt_bool(const Json& obj, const char* key, bool def, const JsonPath& at);
int64_t get_int(const Json& obj, const char* key, const JsonPath& at);
std::optional<int64_t> opt_int(const Json& obj, const char* key, const JsonPath& at);
const Json& require_array(const Json& obj, const char* key, const JsonPath& at);
std::string as_string(const Json& v, const JsonPath& at);
int64_t as_int(const Json& v, const JsonPath& at);
// A single code point given as a one-character string.
uint32_t get_char(const Json& obj, const char* key, const JsonPath& at);

// A "Sequence" component (of normalizers, pre-tokenizers, post-processors or decoders): a `Seq`
// whose `parts` are `make` applied to each element of the array `key`, each with its own path.
template <typename Seq, typename Make>
std::unique_ptr<Seq> make_sequence(const Json& obj, const char* key, const JsonPath& at, Make make) {
  auto seq = std::make_unique<Seq>();
  const Json& arr = require_array(obj, key, at);
  for (size_t i = 0; i < arr.size(); ++i) seq->parts.push_back(make(arr[i], at.child(key).index(i)));
  return seq;
}

}  // namespace tpbatch::tok
