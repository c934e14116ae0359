// The effective-job YAML, emitted from the key table: every emitted key with its value, in table order.
#include <charconv>

#include "job/job_keys.h"
#include "job/yaml_json.h"

namespace tpbatch {
namespace {

using namespace job_key;

std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

// Emits one key's value: one overload per kind of value.
class ValueEmitter {
 public:
  // The accessors take a JobSpec& to serve reading as well; emitting only reads through them.
  ValueEmitter(YAML::Emitter& e, const JobSpec& job) : e_(e), job_(const_cast<JobSpec&>(job)) {}

  void operator()(const Text& t) const { e_ << t.field(job_); }
  void operator()(const OptionalText& t) const {
    const auto& v = t.field(job_);
    if (v)
      e_ << *v;
    else
      e_ << YAML::Null;
  }
  void operator()(const EnumChoice& c) const { e_ << c.choices.at(c.get(job_)); }
  void operator()(const Integer& i) const { e_ << i.field(job_); }
  void operator()(const Unsigned& u) const { e_ << u.field(job_); }
  void operator()(const Number& r) const { e_ << format_double(r.field(job_)); }
  void operator()(const FiniteNumber& f) const { e_ << format_double(f.field(job_)); }
  void operator()(const Flag& f) const { e_ << f.field(job_); }
  void operator()(const StopStrings& s) const {
    e_ << YAML::Flow << YAML::BeginSeq;
    for (const auto& text : s.field(job_)) e_ << YAML::DoubleQuoted << text;
    e_ << YAML::EndSeq;
  }
  void operator()(const TokenIds& t) const {
    e_ << YAML::Flow << YAML::BeginSeq;
    for (int32_t id : t.field(job_)) e_ << id;
    e_ << YAML::EndSeq;
  }
  void operator()(const JsonMapping& m) const {
    const std::string& text = m.field(job_);
    emit_json_as_yaml(e_, text.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(text));
  }

 private:
  YAML::Emitter& e_;
  JobSpec& job_;
};

}  // namespace

std::string emit_job_yaml(const JobSpec& job) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  std::string open;  // the section whose mapping is open; "" = none
  for (const JobKey& k : job_keys()) {
    if (k.emitted && !k.emitted(job)) continue;
    const std::string section = section_of(k.key);
    if (section != open) {
      if (!open.empty()) e << YAML::EndMap;
      if (!section.empty()) e << YAML::Key << section << YAML::Value << YAML::BeginMap;
      open = section;
    }
    e << YAML::Key << leaf_of(k.key) << YAML::Value;
    std::visit(ValueEmitter(e, job), k.value);
  }
  if (!open.empty()) e << YAML::EndMap;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace tpbatch
