#include "io/line_sampling.h"

#include <cmath>
#include <limits>
#include <variant>

#include "common/error.h"
#include "job/sampling_keys.h"

namespace tpbatch {

namespace {

using json = nlohmann::json;
using namespace job_key;

// Reads one (non-null) JSON value into its field: one overload per kind of value a sampling key
// has. The table's accessors reach a field through a JobSpec, so the line's values go to a scratch
// one whose sampling the caller holds.
class LineValueReader {
 public:
  LineValueReader(const std::string& name, const json& v, const LineContext& ctx, JobSpec& scratch)
      : name_(name), v_(v), ctx_(ctx), job_(scratch) {}

  [[noreturn]] void must_be(const std::string& what) const { ctx_.bad("'" + name_ + "' must be " + what); }

  void operator()(const Integer& i) const {
    int64_t x;
    if (!json_as_int64(v_, x) || x < i.min || (i.max && x > *i.max))
      must_be(i.max ? "an integer in [" + std::to_string(i.min) + ", " + std::to_string(*i.max) + "]"
                    : "an integer >= " + std::to_string(i.min));
    i.field(job_) = x;
  }
  void operator()(const Unsigned& u) const {
    if (!v_.is_number_unsigned()) must_be("a non-negative integer");
    u.field(job_) = v_.get<uint64_t>();
  }
  void operator()(const Number& r) const {
    if (!v_.is_number() || !r.allows(v_.get<double>())) must_be(number_requirement(r));
    r.field(job_) = v_.get<double>();
  }
  void operator()(const FiniteNumber& f) const {
    if (!v_.is_number() || !std::isfinite(v_.get<double>())) must_be("a finite number");
    f.field(job_) = v_.get<double>();
  }
  void operator()(const Flag& f) const {
    if (!v_.is_boolean()) must_be("true or false");
    f.field(job_) = v_.get<bool>();
  }
  void operator()(const StopStrings& s) const {
    const std::string what = "a string or a list of non-empty strings";
    std::vector<std::string> stop;
    if (v_.is_string()) {
      stop.push_back(v_.get<std::string>());
    } else if (v_.is_array()) {
      for (const auto& e : v_) {
        if (!e.is_string()) must_be(what);
        stop.push_back(e.get<std::string>());
      }
    } else {
      must_be(what);
    }
    for (const auto& text : stop)
      if (text.empty()) must_be(what);
    s.field(job_) = std::move(stop);
  }
  void operator()(const TokenIds& t) const {  // a list only, unlike the job key (a line's value is JSON)
    const std::string what = "a list of token ids (integers >= 0)";
    if (!v_.is_array()) must_be(what);
    std::vector<int32_t> ids;
    for (const auto& e : v_) {
      int64_t id;
      if (!json_as_int64(e, id) || id < 0 || id > std::numeric_limits<int32_t>::max()) must_be(what);
      ids.push_back(static_cast<int32_t>(id));
    }
    t.field(job_) = std::move(ids);
  }
  void operator()(const OptionalText& t) const {
    if (!v_.is_string() || v_.get<std::string>().empty()) must_be("a non-empty string");
    t.field(job_) = v_.get<std::string>();
  }
  void operator()(const JsonMapping& m) const {  // an object, or a string holding one (vLLM takes both)
    json v = v_;
    if (v.is_string()) v = json::parse(v_.get<std::string>(), nullptr, false);
    if (!v.is_object() || v.empty()) must_be("a non-empty JSON object (or a string holding one)");
    const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(v.dump());
    if (m.problem)
      if (const std::string why = m.problem(ordered, name_); !why.empty()) ctx_.bad(why);
    m.field(job_) = ordered.dump();
  }
  // Kinds no sampling key has yet: a new key of such a kind needs its line reading written here.
  template <typename Kind>
  void operator()(const Kind&) const {
    throw Error("internal error: sampling key '" + name_ + "' has a kind an input line cannot set");
  }

 private:
  const std::string& name_;
  const json& v_;
  const LineContext& ctx_;
  JobSpec& job_;
};

}  // namespace

namespace {

// A line that sets a kind of constraint replaces the job's (whatever its kind); the bounds stay.
void clear_job_constraint_if_line_sets_one(const json& line, guided::ConstraintSource& g) {
  for (const char* k : {"guided_json", "guided_json_object", "guided_regex", "guided_choice", "guided_grammar"}) {
    const auto it = line.find(k);
    if (it == line.end() || it->is_null()) continue;
    g.json_schema.clear();
    g.json_object = false;
    g.regex.reset();
    g.choice.clear();
    g.grammar.reset();
    return;
  }
}

}  // namespace

void apply_line_sampling(const json& line, const LineContext& ctx, SamplingParams& params) {
  clear_job_constraint_if_line_sets_one(line, params.guided);
  JobSpec scratch;
  scratch.sampling = std::move(params);
  for (const SamplingKey& k : sampling_keys()) {
    if (!k.per_line) continue;
    const std::string name = k.name();
    const auto it = line.find(name);
    if (it == line.end() || it->is_null()) continue;
    std::visit(LineValueReader(name, *it, ctx, scratch), k.value);
  }
  params = std::move(scratch.sampling);
  if (params.guided.kinds() > 1)
    ctx.bad("set one of 'guided_json', 'guided_json_object', 'guided_regex', 'guided_choice' (this line sets several)");
}

}  // namespace tpbatch
