// The AVX2 + FMA versions of cpu_exp_ops.cpp's silu_mul and sum_exp_shifted; cpu_exp_ops.cpp calls
// them after checking the CPU. Every standard header is included BEFORE the pragma (see gemm_avx2.cpp):
// an inline function instantiated under it could otherwise be emitted with AVX2 code and picked by the
// linker for the whole program. vector_exp.h is included after it, so its functions here are AVX2's.
#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>

namespace tpbatch::cpu::detail {
// cpu_exp_ops.cpp: the portable tails.
void silu_mul_portable(const float* g, const float* u, float* o, int64_t n);
double sum_exp_portable(const float* x, int64_t n, float shift);
}  // namespace tpbatch::cpu::detail

#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TPBATCH_VEXP_AVX2 1
#include "backend/cpu/vector_exp.h"

namespace tpbatch::cpu::detail {

void silu_mul_avx2(const float* g, const float* u, float* o, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 e = vexp::exp8(_mm256_xor_ps(gv, sign));
    _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_div_ps(gv, _mm256_add_ps(one, e)), _mm256_loadu_ps(u + i)));
  }
  silu_mul_portable(g + i, u + i, o + i, n - i);
}

double sum_exp_avx2(const float* x, int64_t n, float shift) {
  const __m256 sv = _mm256_set1_ps(shift);
  __m256d lo = _mm256_setzero_pd(), hi = _mm256_setzero_pd();
  __m256 nan = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 xv = _mm256_loadu_ps(x + j);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(xv, xv, _CMP_UNORD_Q));
    const __m256 e = vexp::exp8(_mm256_sub_ps(xv, sv));
    lo = _mm256_add_pd(lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    hi = _mm256_add_pd(hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(lo, hi));
  const double tail = sum_exp_portable(x + j, n - j, shift);
  if (_mm256_movemask_ps(nan) != 0) return std::numeric_limits<double>::quiet_NaN();
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + tail;
}

float exp_in_place_avx2(float* x, int64_t n, float shift) { return vexp::exp_shifted_in_place8(x, n, shift); }

}  // namespace tpbatch::cpu::detail
#pragma GCC pop_options
#endif  // __x86_64__
