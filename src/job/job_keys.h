#pragma once
// The keys of the job file, each written once: its dotted name, the JobSpec field it fills, the kind
// of value with its validation, what it means, and when the effective-job YAML carries it. Parsing,
// the known-key check, `--set`, the effective YAML and the reference (docs/job-keys.md) all read
// this one table.
#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "job/job_spec.h"

namespace tpbatch {

// Where a key's value came from, for error messages: "--set key=value" when an override set it,
// else the job file's name.
class KeyErrors {
 public:
  KeyErrors(std::string source, std::map<std::string, std::string> override_src)
      : source_(std::move(source)), override_src_(std::move(override_src)) {}
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;

 private:
  std::string source_;
  std::map<std::string, std::string> override_src_;  // dotted key -> "key=value" as given
};

// The kinds of value. Each holds an accessor to its field (a capture-less lambda, JOB_FIELD below)
// and the rule a value must meet; absent or null keeps the field's default.
namespace job_key {

enum class TextRule { kAny, kNonEmpty, kRequired };

struct Text {  // a string
  std::string& (*field)(JobSpec&);
  TextRule rule = TextRule::kAny;
};
struct OptionalText {  // a non-empty string, or null for none
  std::optional<std::string>& (*field)(JobSpec&);
};
struct EnumChoice {  // one of a fixed set of names, held as an enum whose values count from 0 in that order
  std::vector<std::string> choices;
  size_t (*get)(const JobSpec&);
  void (*set)(JobSpec&, size_t index);
};
struct Integer {  // an int64 >= min (and <= max when given)
  int64_t& (*field)(JobSpec&);
  int64_t min;
  std::optional<int64_t> max = std::nullopt;
};
struct Unsigned {  // a uint64
  uint64_t& (*field)(JobSpec&);
};
struct Number {  // a finite double above lo (or at it unless lo_open), at most hi when given
  double& (*field)(JobSpec&);
  double lo;
  bool lo_open;
  std::optional<double> hi;
  bool allows(double v) const { return std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (!hi || v <= *hi); }
};
struct FiniteNumber {  // any finite double (the penalties, which may be negative)
  double& (*field)(JobSpec&);
};
struct Flag {  // true or false
  bool& (*field)(JobSpec&);
};
struct StopStrings {  // a non-empty string or a list of them
  std::vector<std::string>& (*field)(JobSpec&);
};
struct TokenIds {  // a token id or a list of them, each in [0, 2^31)
  std::vector<int32_t>& (*field)(JobSpec&);
};
struct JsonMapping {  // a mapping of names to any values, held as a JSON object's text ("" = none)
  std::string& (*field)(JobSpec&);
  // Why a (non-empty) value cannot be used, "" when it can; null = any mapping.
  std::string (*problem)(const nlohmann::ordered_json&, const std::string& key) = nullptr;
};

using Value = std::variant<Text, OptionalText, EnumChoice, Integer, Unsigned, Number, FiniteNumber, Flag,
                           StopStrings, TokenIds, JsonMapping>;

}  // namespace job_key

// A capture-less accessor for one JobSpec field, e.g. JOB_FIELD(engine.threads).
#define JOB_FIELD(member) [](JobSpec& j) -> auto& { return j.member; }
// The two accessors of an enum field (EnumChoice): its value as an index into the names, and back.
#define JOB_ENUM_FIELD(member, Enum)                                 \
  [](const JobSpec& j) { return static_cast<size_t>(j.member); }, \
      [](JobSpec& j, size_t i) { j.member = static_cast<Enum>(i); }

struct JobKey {
  const char* key;  // dotted: "model", "engine.threads"
  job_key::Value value;
  const char* doc;  // what it means, one or two sentences: the job-key reference (`tpbatch job-keys`)
  // Whether the effective YAML carries the key; null = always. A key added after results files were
  // written is emitted only when it differs from its default, so those files still resume.
  bool (*emitted)(const JobSpec&) = nullptr;
};

// Every key, in the order of the effective YAML (a section's keys are consecutive).
const std::vector<JobKey>& job_keys();

// The section of a dotted key ("" for a top-level one) and its leaf.
std::string section_of(const std::string& dotted);
std::string leaf_of(const std::string& dotted);

// Whether `dotted` names a key of the table; whether `name` is a section; a section's first key.
bool is_job_key(const std::string& dotted);
bool is_job_section(const std::string& name);
std::string first_key_of(const std::string& section);  // the leaf, e.g. "tensor" for "parallel"

// Known keys for suggestions: the top-level keys, then each section's name followed by its dotted keys.
std::vector<std::string> known_key_names();

// What a Number must be, as error messages say it: "a number in (0, 1]", "a number >= 0".
// Inline: the row parser says it where the job file's reader (yaml-cpp) is not linked (the fuzz targets).
inline std::string number_requirement(const job_key::Number& r) {
  std::ostringstream what;
  if (r.hi)
    what << "a number in " << (r.lo_open ? "(" : "[") << r.lo << ", " << *r.hi << "]";
  else
    what << "a number " << (r.lo_open ? "> " : ">= ") << r.lo;
  return what.str();
}

// How a value looks in an error message: a number or boolean as written, a string quoted, else
// "a list", "a mapping", "nothing".
std::string value_repr(const YAML::Node& n);

// Reads every key of the table from the (already structure-checked) tree into `job`, validating each.
void read_job_keys(const YAML::Node& root, const KeyErrors& errors, JobSpec& job);

// The effective-job YAML: every emitted key of the table with its value, in table order. Resumes
// compare it with the one in the results file, so its text for a given job must not change.
std::string emit_job_yaml(const JobSpec& job);

}  // namespace tpbatch
