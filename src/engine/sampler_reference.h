#pragma once
// The definition of a sampled draw, computed the direct way: every candidate sorted. sample_token
// (sampler.h) returns exactly what this returns; it takes this path itself only where its bounds
// need a finite maximum and no NaN (sampler_fast.h), and the tests hold the fast path to it.
#include <cstdint>

#include "job/sampling_params.h"

namespace tpbatch {

// Candidates sorted by (logit descending, id ascending), the first top_k kept (all when top_k is 0
// or >= vocab); prob[i] = exp((logit_i - max) / temperature) in double; z the sum of prob over
// them, in order; top-p keeps the shortest prefix whose running sum of prob[i] / z reaches top_p;
// min-p then keeps, from the second candidate on, the prefix with prob[i] >= min_p * prob[0]; mass
// is the running sum of the kept prob, u = counter_uniform(seed, row, step, sample) * mass, and the
// draw is the first kept candidate whose running sum exceeds u (the last kept one if none does).
// Every sum is a double accumulated in that order. Temperature > 0.
int32_t sample_token_reference(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t row,
                               uint64_t step, uint64_t sample);

}  // namespace tpbatch
