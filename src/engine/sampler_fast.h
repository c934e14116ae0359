#pragma once
// The sampled draw without sorting the vocabulary: the token sample_token_reference returns, bit for
// bit, from the few candidates that can decide it.
//
// Why that is possible: the draw reads sums of p_i = exp((l_i - max) / T) in double, taken in the
// sorted order (sampler_reference.h). Tokens far below the maximum add almost nothing to them, and
// a decision (where top-p cuts, which running sum first exceeds u) that holds for every value the
// sums can take without them holds for the sums themselves.
//
// Method. Candidates are the tokens with logit >= a threshold t: a prefix of the sorted order,
// sorted and summed exactly as the reference does, so their running sums C_i are the reference's.
// The rest, the tail, enter only through bounds: [lo, hi] on the sum of their p (from a float 2^x
// of stated error, bound_exp.h, the argument's float rounding and the float sums, logit_scan.h), p_max >= any one of them, and
// the rounding of at most `tail count` further double additions. The reference's normalizer z then
// lies in [z_lo, z_hi]; top-p's cut is computed at both ends (the running sum of fl(p_i / z) is
// monotone in z) and must agree; min-p cuts inside the candidates or, if min_p >= p_max, right
// after them; the kept mass and u = U * mass get bounds the same way, and the draw (the first
// C_i > u; C is monotone) must be the same candidate at both ends of u. Anything undecided moves t
// down: 8, 12, 16 nats below the maximum at the temperature, then the exact level, which leaves
// out only tokens with (l - max) / T <= -37: their p < 2^-53, so adding one to a double sum of at
// least 1 (every sum starts with p = 1 for the maximum) rounds back to the sum. Dropping them
// changes no sum, and the exact level always decides.
//
// Cost: two passes over the logits (the maximum; the tail bounds with the first candidates), a sort
// of the candidates (a few hundred at 8 nats for a language model's logits) and an exp in double
// for each. A deeper level rescans the logits once and sorts its new candidates; its chance is
// about the tail's share of the probability (a few percent at 8 nats, under 0.5% at 12). A row
// with a NaN logit, or a maximum that is not finite, takes sample_token_reference.
#include <cstdint>

#include "job/sampling_params.h"

namespace tpbatch {

// Temperature > 0. Scratch is per thread and kept between calls (no allocation once warm).
int32_t sample_token_fast(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t row,
                          uint64_t step, uint64_t sample);

// Which level decided this thread's draws so far (0-2: 8, 12, 16 nats; 3: exact), and how many
// went to the reference: for the tests (every level reached) and the benchmark.
struct FastSamplerCounts {
  int64_t level[4] = {0, 0, 0, 0};
  int64_t reference = 0;
};
FastSamplerCounts& fast_sampler_counts();

}  // namespace tpbatch
