#pragma once
// Horizontal sums of the AVX2 GEMM kernels (gemm_avx2.cpp, gemm_dequant.cpp), in one place so that
// kernels meant to agree to the last bit reduce their lanes in the same order. Include it after the
// file's `#pragma GCC target("avx2,fma,f16c")`.
#include <immintrin.h>

namespace tpbatch::cpu::detail {
namespace {

// The eight lanes of each of a, b, c, d summed: {Σa, Σb, Σc, Σd}.
inline __m128 sum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

inline float sum1(__m256 a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace tpbatch::cpu::detail
