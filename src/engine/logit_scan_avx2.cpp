// logit_scan.h's scans in 8 lanes, for CPUs with AVX2 (logit_scan.cpp checks before calling).
// Standard headers before the target pragma, so only this file's own code is built for it.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/logit_scan.h"

#if defined(__x86_64__)
#pragma GCC target("avx2")
#include "engine/logit_scan_kernel.h"

namespace tpbatch {
namespace {
using Lanes = float __attribute__((vector_size(32)));
}  // namespace

float max_logit_avx2(const float* logits, int64_t n) { return max_logit_kernel<Lanes>(logits, n); }

TailScan scan_tail_avx2(const float* logits, int64_t n, float mx, float scale, float t, float below, bool sums,
                       int32_t* ids) {
  return scan_tail_kernel<Lanes>(logits, n, mx, scale, t, below, sums, ids);
}

}  // namespace tpbatch
#endif
