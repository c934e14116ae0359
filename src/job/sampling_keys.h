#pragma once
// The sampling parameters, each written once: its job key (`sampling.<name>`, with kind, bounds
// and doc as every job key has), whether an input line may set it, and the names an OpenAI request
// body gives it. The job-key table, the per-line overrides and the known-key list of an input line,
// the OpenAI body mapping and the error texts that list accepted keys all read this table, so a
// new sampling parameter is one row here.
#include <string>
#include <string_view>
#include <vector>

#include "job/job_keys.h"

namespace tpbatch {

struct SamplingKey {
  const char* key;        // the job key: "sampling.top_p"
  job_key::Value value;   // its kind, bounds and JobSpec field (the per-line value goes to the same field)
  const char* doc;        // the job-key reference's text
  bool per_line = true;   // an input line may set it under its name (name())
  // The body keys of an OpenAI request that carry it, in the order error texts name them (none: {}).
  // "logprobs" carries top_logprobs only as /v1/completions' integer; a boolean is chat's flag.
  std::vector<std::string> openai = {};
  // As JobKey::emitted: whether the effective YAML carries it; null = always.
  bool (*emitted)(const JobSpec&) = nullptr;

  std::string name() const;  // the key without "sampling.": an input line's name for it
};

// Every sampling parameter, in the order of the effective YAML and of the per-line checks.
const std::vector<SamplingKey>& sampling_keys();

// The names an input line may use to set a sampling parameter, in table order.
std::vector<std::string> per_line_sampling_names();

// The parameter an OpenAI request body key carries; null for none.
const SamplingKey* sampling_key_of_openai_name(std::string_view body_key);

// Every OpenAI body key that carries a sampling parameter, in table order: for the error text.
std::vector<std::string> openai_sampling_names();

}  // namespace tpbatch
