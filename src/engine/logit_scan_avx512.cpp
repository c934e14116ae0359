// logit_scan.h's scans in 16 lanes, for CPUs with AVX512F (logit_scan.cpp checks before calling).
// Standard headers before the target pragma, so only this file's own code is built for it.
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "engine/logit_scan.h"

#if defined(__x86_64__)
#pragma GCC target("avx512f")
#include "engine/logit_scan_kernel.h"

namespace tpbatch {
namespace {
using Lanes = float __attribute__((vector_size(64)));
}  // namespace

float max_logit_avx512(const float* logits, int64_t n) { return max_logit_kernel<Lanes>(logits, n); }

TailScan scan_tail_avx512(const float* logits, int64_t n, float mx, float scale, float t, float below, bool sums,
                       int32_t* ids) {
  return scan_tail_kernel<Lanes>(logits, n, mx, scale, t, below, sums, ids);
}

}  // namespace tpbatch
#endif
