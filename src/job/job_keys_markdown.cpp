// The job-key reference as Markdown, from the key table: each key's value kind and default come
// from its entry and a default JobSpec, its meaning from the entry's doc.
#include "job/job_keys_markdown.h"

#include <charconv>
#include <sstream>

#include "common/error.h"
#include "job/job_keys.h"

namespace tpbatch {
namespace {

using namespace job_key;

std::string number(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string code(const std::string& s) { return "`" + s + "`"; }

std::string choices(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + code(n);
  return "one of " + out;
}

// What a value must be, in words (the rules the reader enforces).
struct KindText {
  std::string operator()(const Text& t) const { return t.rule == TextRule::kAny ? "string" : "non-empty string"; }
  std::string operator()(const OptionalText&) const { return "non-empty string or null"; }
  std::string operator()(const EnumChoice& c) const { return choices(c.choices); }
  std::string operator()(const Integer& i) const {
    if (i.max) return "integer in [" + std::to_string(i.min) + ", " + std::to_string(*i.max) + "]";
    return "integer ≥ " + std::to_string(i.min);
  }
  std::string operator()(const Unsigned&) const { return "integer in [0, 2^64)"; }
  std::string operator()(const Number& r) const {
    if (r.hi) return std::string("number in ") + (r.lo_open ? "(" : "[") + number(r.lo) + ", " + number(*r.hi) + "]";
    return std::string("number ") + (r.lo_open ? "> " : "≥ ") + number(r.lo);
  }
  std::string operator()(const FiniteNumber&) const { return "finite number"; }
  std::string operator()(const Flag&) const { return "`true` or `false`"; }
  std::string operator()(const StopStrings&) const { return "non-empty string or list of them"; }
  std::string operator()(const TokenIds&) const { return "token id or list of them"; }
  std::string operator()(const JsonMapping&) const { return "mapping of names to values"; }
};

// The default, read through the entry's accessor from a default JobSpec.
struct DefaultText {
  JobSpec& job;
  std::string operator()(const Text& t) const {
    if (t.rule == TextRule::kRequired) return "required";
    const std::string& v = t.field(job);
    return v.empty() ? "none" : code(v);
  }
  std::string operator()(const OptionalText& t) const { return t.field(job) ? code(*t.field(job)) : "`null`"; }
  std::string operator()(const EnumChoice& c) const { return code(c.choices.at(c.get(job))); }
  std::string operator()(const Integer& i) const { return code(std::to_string(i.field(job))); }
  std::string operator()(const Unsigned& u) const { return code(std::to_string(u.field(job))); }
  std::string operator()(const Number& r) const { return code(number(r.field(job))); }
  std::string operator()(const FiniteNumber& f) const { return code(number(f.field(job))); }
  std::string operator()(const Flag& f) const { return code(f.field(job) ? "true" : "false"); }
  std::string operator()(const StopStrings& s) const { return s.field(job).empty() ? "`[]`" : "a list"; }
  std::string operator()(const TokenIds& t) const { return t.field(job).empty() ? "`[]`" : "a list"; }
  std::string operator()(const JsonMapping& m) const { return m.field(job).empty() ? "`{}`" : "a mapping"; }
};

// A table cell: no line breaks, and '|' escaped.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

}  // namespace

std::string job_keys_markdown() {
  std::ostringstream out;
  out << "# Job keys\n\n"
      << "Every key of the job file, in the order of the effective job (the `job_yaml` attribute of a\n"
         "results file). [job.md](job.md) explains the file; a key that is absent or `null` keeps its\n"
         "default. `--set KEY=VALUE` overrides a key by its dotted name.\n\n"
      << "This page is generated from the key table (`src/job/job_keys.cpp`) by `tpbatch job-keys`: edit\n"
         "the table, then `build/tpbatch job-keys > docs/job-keys.md`.\n\n"
      << "| key | value | default | meaning |\n| --- | --- | --- | --- |\n";
  JobSpec defaults;
  for (const JobKey& k : job_keys()) {
    if (!k.doc || !*k.doc) throw Error(std::string("job key '") + k.key + "' has no description in the key table");
    out << "| " << code(k.key) << " | " << cell(std::visit(KindText{}, k.value)) << " | "
        << cell(std::visit(DefaultText{defaults}, k.value)) << " | " << cell(k.doc) << " |\n";
  }
  return out.str();
}

}  // namespace tpbatch
