#pragma once
// Token sampling: greedy, or temperature / top-k / top-p with a counter-based RNG keyed by
// (seed, row, step), so a row's samples never depend on the batch it ran in or on the layout.
#include <cstdint>

#include "job/sampling_params.h"

namespace tpbatch {

// Uniform double in [0, 1) from (seed, row, step): a stateless hash (splitmix64 rounds).
double counter_uniform(uint64_t seed, uint64_t row, uint64_t step);

// Picks a token from full logits [vocab]. Greedy (temperature 0) returns the lowest-id maximum.
int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t row, uint64_t step);

}  // namespace tpbatch
