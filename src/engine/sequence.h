#pragma once
// One input row on its way through a replica: its tokens, its place in the KV cache, and what it
// has produced so far.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/embedding_pooling.h"
#include "guided/constraint.h"
#include "io/finish_reason.h"
#include "job/job_spec.h"
#include "job/sampling_params.h"
#include "tokenizer/tokenizer.h"

namespace tpbatch {

// A generating row's <think> block, for its thinking budget (engine/reasoning_budget.h).
struct ThinkBlock {
  int32_t open_id = -1, close_id = -1;  // the tokens <think> and </think>; -1: no budget to keep
  bool open = false;                    // the last of them in the row's tokens is <think>
  bool ended = false;                   // a </think> is among the row's tokens
  int64_t tokens = 0;                   // generated tokens inside the open block so far
};

struct Sequence {
  int64_t row = 0;                 // results row
  int64_t line = 0;                // input line (messages, sampling stream)
  int32_t sample = 0;              // which of the line's sampling.n samples

  std::string id;
  bool scoring = false;
  bool embedding = false;          // task: embed: prefill only, the prompt's pooled final hidden state
  Pooling pooling = Pooling::Last;
  bool normalize = true;
  int64_t truncated_tokens = 0;    // input.truncate: left: prompt tokens dropped from the front
  uint8_t warning_kind = 0;        // RowWarning: a warning its result carries to the writer rank
  std::string warning;
  std::vector<int32_t> tokens;     // prompt (+ completion when scoring) + generated so far
  int64_t prompt_len = 0;
  int64_t score_from = 0;          // scoring: first position whose token is scored
  int64_t max_len = 0;             // generation stops at this many tokens in all
  SamplingParams sampling;
  std::vector<int32_t> eos_ids;
  Reasoning reasoning = Reasoning::kNone;  // how its text is split (job key reasoning, resolved)
  ThinkBlock think;
  // sampling.guided compiled (shared by the rows with the same constraint), and the matcher's
  // state: the DFA state after the generated tokens, a function of them alone.
  std::shared_ptr<guided::Constraint> constraint;
  int32_t constraint_state = 0;

  // Paged KV cache state.
  int64_t num_computed = 0;        // tokens whose K/V are in the cache
  bool in_flight = false;          // in a pipeline step whose results have not come back
  bool preempted = false;          // was evicted and waits to be recomputed
  bool long_rope = false;          // Phi-3 longrope: longer than the original context, so every
                                   // position turns by the long factors (StepInputs::rope_tables 1)
  std::vector<int32_t> blocks;
  int64_t prompt_tokens_cached = 0;  // prompt tokens the prefix cache served at its first admission

  // Results.
  std::vector<float> logprobs;
  EmbeddingAccumulator embedding_sum;  // embed: pooled rows so far
  std::vector<float> embedding_out;    // embed: the finished embedding
  // sampling.top_logprobs = k: at each generated position its k best tokens and their logprobs,
  // position after position ([num_generated][k], flattened).
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;
  bool all_greedy = true;
  std::optional<IncrementalDetokenizer> detokenizer;  // copyable: the line's other samples start as copies
  std::string text;                // final text (stop string excluded)
  std::optional<FinishReason> finish_reason;  // none while the row runs
  std::string error;               // why the row failed (FinishReason::kError)
  int64_t num_generated() const { return static_cast<int64_t>(tokens.size()) - prompt_len; }

  // Timings for TTFT / TPOT.
  std::chrono::steady_clock::time_point arrived, first_token, finished;
};

}  // namespace tpbatch
