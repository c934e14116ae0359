#pragma once
// Token sampling: greedy, or temperature / top-k / top-p / min-p with a counter-based RNG keyed by
// (seed, row, step, sample), so a row's samples never depend on the batch it ran in or on the layout.
// `row` is the input line; `sample` the sample of it (sampling.n > 1), 0 drawing as before n existed.
// The logits processors (penalties, masks) and the top-logprobs listing work on one row's full
// logits on the host, in one pass over the vocabulary or less; rows may run on parallel threads.
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "job/sampling_params.h"

namespace tpbatch {

// Uniform double in [0, 1) from (seed, row, step, sample): a stateless hash (splitmix64 rounds).
double counter_uniform(uint64_t seed, uint64_t row, uint64_t step, uint64_t sample = 0);

// Picks a token from (processed) logits [vocab]. Greedy (temperature 0) returns the lowest-id
// maximum. Otherwise: softmax at the temperature, cut by top-k, then top-p, then min-p, and a draw
// from what is left, all defined exactly (every double sum and its order) by
// sample_token_reference (sampler_reference.h), whose token this returns for every input; it gets
// there without sorting the vocabulary (sampler_fast.h). Thread-safe; no allocation once a thread
// has sampled a row of this size. row_max: the row's largest logit if known (checked, not trusted).
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t row, uint64_t step,
                     uint64_t sample = 0, std::optional<float> row_max = std::nullopt);

// In place, in vLLM's order: repetition_penalty (Hugging Face: each distinct token of `tokens`, the
// prompt and what was generated, has a positive logit divided by the penalty and a negative one
// multiplied), then OpenAI's presence and frequency penalties over the generated tokens
// (tokens[prompt_len:]): logit -= frequency_penalty * count + presence_penalty * (count > 0).
void apply_penalties(float* logits, int64_t vocab, const SamplingParams& params, std::span<const int32_t> tokens,
                     int64_t prompt_len);

// Sets the logits of `ids` (those inside [0, vocab)) to -infinity: they cannot be picked.
void mask_tokens(float* logits, int64_t vocab, std::span<const int32_t> ids);

// The k most likely tokens under log_softmax(logits) (log_z: the log-sum-exp of logits), best
// first, ties by the lower id. One pass, skipping blocks whose maximum cannot enter the k best.
std::vector<std::pair<int32_t, float>> top_logprobs(const float* logits, int64_t vocab, int64_t k, float log_z);

}  // namespace tpbatch
