#pragma once
// How one row is generated. Job-wide defaults from `sampling:`, overridable per JSONL line.
#include <cstdint>
#include <string>
#include <vector>

#include "guided/constraint_source.h"

namespace tpbatch {

inline constexpr int64_t kMaxTopLogprobs = 20;  // sampling.top_logprobs: at most this many alternatives
inline constexpr int64_t kMaxSamples = 128;     // sampling.n: at most this many samples per prompt (OpenAI's bound)
inline constexpr int64_t kNoReasoningBudget = -1;  // sampling.max_reasoning_tokens unset: no thinking budget

struct SamplingParams {
  int64_t max_new_tokens = 128;
  double temperature = 0.0;          // 0 = greedy
  int64_t top_k = 0;                 // 0 = off
  double top_p = 1.0;
  double min_p = 0.0;                // keep tokens whose probability is >= min_p x the largest; 0 = off
  double repetition_penalty = 1.0;   // HF: over prompt + generated tokens; 1 = off
  double presence_penalty = 0.0;     // OpenAI: over generated tokens; 0 = off
  double frequency_penalty = 0.0;    // OpenAI: over generated tokens; 0 = off
  uint64_t seed = 0;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;  // generating one of these finishes the row ("stop")
  int64_t min_tokens = 0;            // EOS and stop_token_ids are masked until this many are generated
  int64_t top_logprobs = 0;          // k best alternatives recorded at each generated position; 0 = off
  bool ignore_eos = false;
  // Independent samples of the prompt (task: generate): each is a results row of its own, the
  // line's rows consecutive (docs/results-file.md "Several samples per prompt"); sample s draws from (seed, line, sample s, step).
  int64_t n = 1;
  // A thinking budget: once a row's open <think> block holds this many generated tokens, its next
  // token is </think> (engine/reasoning_budget.h). kNoReasoningBudget = none.
  int64_t max_reasoning_tokens = kNoReasoningBudget;
  // What the output must match (JSON Schema, JSON object, regex, choice); none by default.
  guided::ConstraintSource guided;

  bool greedy() const { return temperature <= 0.0; }
  bool penalized() const { return repetition_penalty != 1.0 || presence_penalty != 0.0 || frequency_penalty != 0.0; }
};

}  // namespace tpbatch
