// The sampling table drives every place that names a sampling parameter: the job-key table, an
// input line's overrides and known keys, the OpenAI body mapping and the error texts listing them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <variant>

#include "io/input_row.h"
#include "job/sampling_keys.h"

using namespace tpbatch;
using namespace tpbatch::job_key;
using json = nlohmann::json;

namespace {

// A valid value of a key's kind that differs from its default.
struct SampleValue {
  json operator()(const Integer& i) const { return i.max ? *i.max : i.min + 3; }
  json operator()(const Unsigned&) const { return 7; }
  json operator()(const Number& r) const { return r.hi ? (r.lo + *r.hi) / 2 : r.lo + 0.5; }
  json operator()(const FiniteNumber&) const { return -0.25; }
  json operator()(const Flag&) const { return true; }
  json operator()(const StopStrings&) const { return json::array({"s"}); }
  json operator()(const TokenIds&) const { return json::array({3}); }
  json operator()(const OptionalText&) const { return "a+"; }
  json operator()(const JsonMapping&) const { return json{{"type", "string"}}; }
  template <typename Kind>
  json operator()(const Kind&) const {
    ADD_FAILURE() << "a sampling key of a kind this test has no value for";
    return nullptr;
  }
};

// The value of the field a key's job entry fills, as JSON.
struct FieldValue {
  JobSpec& job;
  json operator()(const Integer& i) const { return i.field(job); }
  json operator()(const Unsigned& u) const { return u.field(job); }
  json operator()(const Number& r) const { return r.field(job); }
  json operator()(const FiniteNumber& f) const { return f.field(job); }
  json operator()(const Flag& f) const { return f.field(job); }
  json operator()(const StopStrings& s) const { return s.field(job); }
  json operator()(const TokenIds& t) const { return t.field(job); }
  json operator()(const OptionalText& t) const { return t.field(job) ? json(*t.field(job)) : json(nullptr); }
  json operator()(const JsonMapping& m) const { return m.field(job).empty() ? json(nullptr) : json::parse(m.field(job)); }
  template <typename Kind>
  json operator()(const Kind&) const { return nullptr; }
};

json field_after(const std::string& line, const SamplingKey& key) {
  JobSpec j;
  j.sampling = parse_input_row(line, 0, JobSpec{}, 512).sampling;
  return std::visit(FieldValue{j}, key.value);
}

std::string bad_line(const std::string& line) {
  try {
    parse_input_row(line, 0, JobSpec{}, 512);
  } catch (const BadLine& b) {
    return b.reason;
  }
  ADD_FAILURE() << "accepted: " << line;
  return "";
}

std::string completion_request(const json& body) {
  return json{{"custom_id", "c"}, {"method", "POST"}, {"url", "/v1/completions"}, {"body", body}}.dump();
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

TEST(SamplingKeys, JobKeyTableHoldsExactlyTheSamplingTableInItsOrder) {
  std::vector<std::string> from_job_keys, from_table;
  for (const JobKey& k : job_keys())
    if (section_of(k.key) == "sampling" || section_of(k.key) == "guided") from_job_keys.push_back(k.key);
  for (const SamplingKey& k : sampling_keys()) from_table.push_back(k.key);
  EXPECT_EQ(from_job_keys, from_table);
}

TEST(SamplingKeys, EveryKeyIsUnderSamplingNamedByItsLeafOrUnderGuidedNamedAsVllmDoes) {
  for (const SamplingKey& k : sampling_keys()) {
    if (section_of(k.key) == "guided") {
      EXPECT_EQ(k.name(), "guided_" + leaf_of(k.key));
      continue;
    }
    EXPECT_EQ(section_of(k.key), "sampling");
    EXPECT_EQ(k.name(), leaf_of(k.key));
  }
}

TEST(SamplingKeys, EveryPerLineKeySetsTheFieldOfItsJobKey) {
  for (const SamplingKey& k : sampling_keys()) {
    if (!k.per_line) continue;
    const json v = std::visit(SampleValue{}, k.value);
    const std::string line = json{{"prompt", "x"}, {k.name(), v}}.dump();
    EXPECT_EQ(field_after(line, k), v) << line;
  }
}

TEST(SamplingKeys, EveryOpenAiNameSetsTheFieldOfItsJobKey) {
  for (const SamplingKey& k : sampling_keys())
    for (const std::string& name : k.openai) {
      const json v = std::visit(SampleValue{}, k.value);
      const std::string line = completion_request({{"prompt", "x"}, {name, v}});
      EXPECT_EQ(field_after(line, k), v) << line;
    }
}

TEST(SamplingKeys, ABadPerLineValueIsRefusedNamingItsKey) {
  for (const SamplingKey& k : sampling_keys()) {
    if (!k.per_line) continue;
    const std::string msg = bad_line(json{{"prompt", "x"}, {k.name(), json::object()}}.dump());
    EXPECT_EQ(msg.rfind("input line 1: '" + k.name() + "' must be ", 0), 0u) << msg;
  }
}

TEST(SamplingKeys, UnknownLineKeyErrorListsEveryPerLineName) {
  const std::string msg = bad_line(R"({"prompt": "x", "best_of": 2})");
  const std::string reads = "id, prompt, messages, chat_template_kwargs, " + joined(per_line_sampling_names());
  EXPECT_NE(msg.find("this job reads: " + reads + ";"), std::string::npos) << msg;
}

TEST(SamplingKeys, UnknownBodyKeyErrorListsEveryOpenAiName) {
  const std::string msg = bad_line(completion_request({{"prompt", "x"}, {"best_of", 2}}));
  EXPECT_NE(msg.find("this engine reads body.prompt, response_format, " + joined(openai_sampling_names()) + ";"), std::string::npos)
      << msg;
}

TEST(SamplingKeys, TwoBodyNamesOfOneKeyThatDisagreeAreRefusedNamingBoth) {
  EXPECT_EQ(bad_line(completion_request({{"prompt", "x"}, {"max_tokens", 3}, {"max_completion_tokens", 4}})),
            "input line 1: 'body.max_tokens' and 'body.max_completion_tokens' differ");
  EXPECT_EQ(bad_line(completion_request({{"prompt", "x"}, {"top_logprobs", 3}, {"logprobs", 4}})),
            "input line 1: 'body.logprobs' and 'body.top_logprobs' differ");
}
