#pragma once
// The sampler's passes over one row of logits, four lanes at a time (GCC vector extensions: SSE2,
// NEON; the engine is built for the baseline ISA). Their results bound, never decide, a draw.
#include <cstdint>
#include <vector>

namespace tpbatch {

// The largest logit (meaningless when the row has a NaN; scan_tail reports one).
float max_logit(const float* logits, int64_t n);

struct TailScan {
  double sum = 0;    // sum of bound_exp2((l - mx) * scale) over the l < t
  bool nan = false;  // some logit is NaN
};

// One pass: appends to `ids` the index of every logit in [t, below) (ascending), and sums
// bound_exp2((l - mx) * scale) over the logits < t: in float within blocks of 128 (each lane 32
// terms, then 3 lane additions) and in double across blocks, so the sum is within
// kScanSumRelError (relative) of the same sum taken exactly.
TailScan scan_tail(const float* logits, int64_t n, float mx, float scale, float t, float below,
                   std::vector<int32_t>& ids);
inline constexpr double kScanSumRelError = 35 * 0x1.0p-24 + 1e-12;

}  // namespace tpbatch
