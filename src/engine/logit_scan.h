#pragma once
// The sampler's passes over one row of logits in SIMD lanes (GCC vector extensions): 4 lanes on the
// baseline ISA (SSE2, NEON), 8 on AVX2 and 16 on AVX-512 where the CPU has them (picked once at
// run time). Their results bound, never decide, a draw (sampler_fast.h), so the ISA changes no token.
#include <cstdint>

namespace tpbatch {

enum class ScanIsa { kBaseline, kAvx2, kAvx512 };
ScanIsa best_scan_isa();  // the widest this CPU runs (and this build has)

// The largest logit, NaNs left out (scan_tail reports them); -inf for n = 0.
float max_logit(const float* logits, int64_t n, ScanIsa isa = best_scan_isa());

// The scan's float sums: each lane adds kScanLaneTerms terms, then a block's lanes are added.
inline constexpr int64_t kScanLaneTerms = 32;
inline constexpr int64_t kScanMaxLanes = 16;

struct TailScan {  // an aggregate: nothing of it is compiled in the ISA files (logit_scan_kernel.h)
  double sum;     // sum of bound_exp2((l - mx) * scale) over the l < t (0 without `sums`)
  int64_t count;  // ids written
  bool nan;       // some logit is NaN
  float max;      // the largest logit, NaNs left out (-inf for n = 0)
};

// One pass: finds the maximum (a check on the mx it was given); writes to ids[0, count) the index
// of every logit in [t, below), in an order of the scan's own (by block, then lane; the sampler
// sorts them), room for n needed; and with `sums` adds up bound_exp2((l - mx) * scale) over the
// logits < t: in float within a block (kScanLaneTerms terms a lane, then up to kScanMaxLanes lanes),
// in double across blocks, so the sum is within kScanSumRelError (relative) of the same terms
// added exactly.
TailScan scan_tail(const float* logits, int64_t n, float mx, float scale, float t, float below, bool sums,
                   int32_t* ids, ScanIsa isa = best_scan_isa());
inline constexpr double kScanSumRelError = (kScanLaneTerms + kScanMaxLanes) * 0x1.0p-24 + 1e-12;

}  // namespace tpbatch
