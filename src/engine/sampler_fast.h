#pragma once
// The sampled draw without sorting the vocabulary: the token sample_token_reference returns, bit for
// bit, from the few candidates that can decide it.
//
// Why that is possible: the draw reads sums of p_i = exp((l_i - max) / T) in double, taken in the
// sorted order (sampler_reference.h). Tokens far below the maximum add almost nothing to them, and
// a decision (where top-p cuts, which running sum first exceeds u) that holds for every value the
// sums can take without them holds for the sums themselves.
//
// Method, one level at a time, the threshold t at 8, 12, 16 nats below the maximum (t = max - c T),
// then the exact level's:
//  1. Candidates, the tokens with l >= t, are a prefix of the reference's order (ties stay together:
//     t is a logit). They are sorted by (logit desc, id asc) and their p and running sums C_i
//     computed exactly as the reference does, so every C_i is the reference's.
//  2. The tail, the tokens below t, enters only through bounds: [lo, hi] on the sum of its p (a float
//     2^x of tested error, bound_exp.h, plus the float argument's rounding and the float sums,
//     logit_scan.h: 5e-5 relative), p_max >= any one of its p (exp at t), and its count m, which
//     bounds the rounding of the reference's further double additions (each <= 2^-53 relative).
//  3. With top_k = K (the reference's list is the K best): K <= candidates leaves no tail in the
//     list and everything below is exact; else the list's tail part sums to [lo, hi] (all of the
//     tail) or [0, hi] (part of it). z, the list's sum, lies in [z_lo, z_hi].
//  4. top-p: the reference's running sum of fl(p_i / z) is monotone in z, so its cut is computed at
//     z_lo and at z_hi over the candidates and must agree (a cut among them, or none: then the kept
//     prefix reaches into the tail).
//  5. min-p: the reference's cut (the first p_i < min_p * p_0, p_0 = 1) among the candidates is
//     exact; if there is none, min_p > p_max puts it right after them, else it is somewhere in the
//     tail.
//  6. mass, the kept prefix's sum: exact within the candidates; [z_lo, z_hi] when the whole list is
//     kept (no top-p, no min-p); [C_last, z_hi] for an unknown cut in the tail. u = U * mass (U =
//     counter_uniform) is monotone in mass, and the draw, the first C_i > u, is monotone in u: it
//     is computed at both ends and must be the same candidate.
//  7. Anything undecided goes to the next level. The exact level's threshold leaves out only tokens
//     with (l - max) / T <= -37 as the reference computes it: their p < 2^-53, so adding one to a
//     double sum of at least 1 (every sum of p starts with p_0 = 1) rounds back to the sum, and the
//     draw never lands past the candidates (u < mass). Nothing it leaves out changes z, mass or the
//     draw, so it always decides.
// A row with a NaN logit, or a maximum that is not finite, takes sample_token_reference.
//
// Cost: two passes over the logits (the maximum, unless the caller knows it; the tail bound and the
// first candidates, which also checks the maximum), a sort
// of the candidates (a few hundred at 8 nats for a language model's logits) and an exp in double
// for each. A deeper level rescans the logits and sorts its new candidates; its chance is about the
// tail's share of the probability (a few percent at 8 nats, under 0.5% at 12). A top-k list within
// the candidates needs no tail sum, and its pass no exp.
#include <cstdint>
#include <optional>

#include "job/sampling_params.h"

namespace tpbatch {

// Temperature > 0. Scratch is per thread and kept between calls (no allocation once warm).
// row_max: the row's largest logit when the caller has it (the LM head's statistics), which saves
// a pass; checked by the first scan, and a wrong one only costs that scan.
int32_t sample_token_fast(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t row,
                          uint64_t step, uint64_t sample, std::optional<float> row_max = std::nullopt);

// Which level decided this thread's draws so far (0-2: 8, 12, 16 nats; 3: exact), and how many
// went to the reference: for the tests (every level reached) and the benchmark.
struct FastSamplerCounts {
  int64_t level[4] = {0, 0, 0, 0};
  int64_t reference = 0;
};
FastSamplerCounts& fast_sampler_counts();

}  // namespace tpbatch
