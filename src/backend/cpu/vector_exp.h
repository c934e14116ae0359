#pragma once
// exp(x) for the softmax, eight lanes at a time (AVX2 + FMA), and its scalar reference: the same
// operations in the same order, so the two agree bit for bit and the tests measure the error once.
//
// Method (Cephes expf): n = round(x / ln 2), r = x - n ln 2 (ln 2 split in two so r is exact to a few
// ulp), e^r by a degree-7 polynomial on |r| <= ln 2 / 2, times 2^n put straight into the exponent.
// Error against exp in double, x in [-87.33, 0]: max relative error 8.4e-8 (under 1 ulp; measured
// over 2e7 evenly spaced points); the tests hold it to kExpMaxRelError = 2e-7 over [-100, 0] and a few
// points up to 88 (tests/unit/test_vector_exp.cpp). Below
// -87.33 (results under the smallest normal float) it returns 0, -inf included: an absolute error
// under 1.2e-38, nothing next to a softmax sum that is at least 1. Above 88 it returns exp(88), not
// inf (the softmax only ever asks for x <= 0). NaN in -> 0.
//
// The vector version is declared only where TPBATCH_VEXP_AVX2 is defined before the include: in a file
// that has raised its target (`#pragma GCC target("avx2,fma")`; GCC does not define __AVX2__ there).
// Elsewhere only the scalar reference is. Both are `static`: each
// file gets its own copy compiled for its own target, so the linker can never hand a file built for
// x86-64-v2 the AVX2 copy of another.
#include <bit>
#include <cmath>
#include <cstdint>

namespace tpbatch::cpu::vexp {

inline constexpr float kExpLo = -87.33654f;     // below: the result is 0
inline constexpr float kExpHi = 88.0f;         // above: clamped (2^n stays a normal float)
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kLn2Hi = 0.693359375f;   // few mantissa bits: n * kLn2Hi is exact
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
inline constexpr double kExpMaxRelError = 2e-7;  // the bound the tests hold both versions to

// The scalar reference (also the tail of vector loops). std::fma where the vector code fuses, and
// nearbyint (round to nearest even, like _mm256_round_ps), so the lanes match exactly.
static inline float exp_scalar(float x) {
  if (!(x >= kExpLo)) return 0.0f;
  x = std::fmin(x, kExpHi);
  const float n = std::nearbyint(x * kLog2e);
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float p = kP0;
  p = std::fma(p, r, kP1);
  p = std::fma(p, r, kP2);
  p = std::fma(p, r, kP3);
  p = std::fma(p, r, kP4);
  p = std::fma(p, r, kP5);
  p = std::fma(p, r * r, r);
  p = p + 1.0f;
  // 2^n: n in [-126, 127]; a result under the smallest normal keeps p's share by a second multiply.
  const int32_t ni = static_cast<int32_t>(n);
  const float two_n = std::bit_cast<float>(static_cast<uint32_t>(ni + 127) << 23);
  return p * two_n;
}

}  // namespace tpbatch::cpu::vexp

#if defined(TPBATCH_VEXP_AVX2)
#include <immintrin.h>

namespace tpbatch::cpu::vexp {

// Eight lanes of exp_scalar.
static inline __m256 exp8(__m256 x) {
  const __m256 zero_mask = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLo), _CMP_NGE_UQ);  // x < lo, or NaN
  x = _mm256_min_ps(x, _mm256_set1_ps(kExpHi));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Hi), x);
  r = _mm256_fmadd_ps(n, _mm256_set1_ps(-kLn2Lo), r);
  __m256 p = _mm256_set1_ps(kP0);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kP5));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  p = _mm256_add_ps(p, _mm256_set1_ps(1.0f));
  // Clamped x below lo gives n = -126 at worst (garbage lanes are masked to 0 below anyway).
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(ni, _mm256_set1_epi32(127)), 23));
  return _mm256_andnot_ps(zero_mask, _mm256_mul_ps(p, two_n));
}

// x[j] = exp(x[j] - shift) over [0, n), eight lanes at a time and exp_scalar for the tail;
// returns their sum (the lanes' partial sums added pairwise, then the tail in order).
static inline float exp_shifted_in_place8(float* x, int64_t n, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + j), sh));
    _mm256_storeu_ps(x + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  float sum = _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  for (; j < n; ++j) sum += (x[j] = exp_scalar(x[j] - shift));
  return sum;
}

}  // namespace tpbatch::cpu::vexp
#endif
