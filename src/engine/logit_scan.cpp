#include "engine/logit_scan.h"

#include <cstring>

#include "engine/logit_scan_kernel.h"

namespace tpbatch {

// logit_scan_avx2.cpp, logit_scan_avx512.cpp (x86-64 only).
float max_logit_avx2(const float* logits, int64_t n);
TailScan scan_tail_avx2(const float* logits, int64_t n, float mx, float scale, float t, float below, bool sums,
                        int32_t* ids);
float max_logit_avx512(const float* logits, int64_t n);
TailScan scan_tail_avx512(const float* logits, int64_t n, float mx, float scale, float t, float below, bool sums,
                          int32_t* ids);

namespace {
using Baseline = float __attribute__((vector_size(16)));
}  // namespace

ScanIsa best_scan_isa() {
#if defined(__x86_64__)
  static const ScanIsa isa = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return ScanIsa::kAvx512;
    if (__builtin_cpu_supports("avx2")) return ScanIsa::kAvx2;
    return ScanIsa::kBaseline;
  }();
  return isa;
#else
  return ScanIsa::kBaseline;
#endif
}

float max_logit(const float* logits, int64_t n, ScanIsa isa) {
#if defined(__x86_64__)
  if (isa == ScanIsa::kAvx512) return max_logit_avx512(logits, n);
  if (isa == ScanIsa::kAvx2) return max_logit_avx2(logits, n);
#endif
  (void)isa;
  return max_logit_kernel<Baseline>(logits, n);
}

TailScan scan_tail(const float* logits, int64_t n, float mx, float scale, float t, float below, bool sums,
                   int32_t* ids, ScanIsa isa) {
#if defined(__x86_64__)
  if (isa == ScanIsa::kAvx512) return scan_tail_avx512(logits, n, mx, scale, t, below, sums, ids);
  if (isa == ScanIsa::kAvx2) return scan_tail_avx2(logits, n, mx, scale, t, below, sums, ids);
#endif
  (void)isa;
  return scan_tail_kernel<Baseline>(logits, n, mx, scale, t, below, sums, ids);
}

}  // namespace tpbatch
