// The AVX2 + FMA + F16C kernels of gemm_nt. The project compiles for x86-64-v2, so this file
// switches the target on with a pragma for its own functions only; gemm.cpp calls them after
// checking the CPU. Every standard header is included BEFORE the pragma: an inline function
// instantiated under it could otherwise be emitted with AVX2 code and picked by the linker for
// the whole program.
#include <cstdint>
#include <cstring>

#include "backend/cpu/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX2)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpbatch::cpu::detail {
namespace {

// Eight weights widened to fp32. bf16 is the top half of an fp32: zero-extend and shift by 16.
template <DType WT>
struct Weights;
template <>
struct Weights<DType::F32> {
  static constexpr int kBytes = 4;
  static __m256 load8(const unsigned char* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
template <>
struct Weights<DType::BF16> {
  static constexpr int kBytes = 2;
  static __m256 load8(const unsigned char* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};
template <>
struct Weights<DType::F16> {
  static constexpr int kBytes = 2;
  static __m256 load8(const unsigned char* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

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

// acc[r][i] += w_r[kk..kk+8) · x_i[kk..kk+8) for R weight rows and MB rows of x.
template <DType WT, int R, int MB>
inline void fma_step(__m256 (&acc)[R][MB], const float* x, int64_t ldx, const unsigned char* w, int64_t ldwb,
                     int64_t kk) {
  __m256 xv[MB];
  for (int i = 0; i < MB; ++i) xv[i] = _mm256_loadu_ps(x + i * ldx + kk);
  for (int r = 0; r < R; ++r) {
    const __m256 wv = Weights<WT>::load8(w + r * ldwb + kk * Weights<WT>::kBytes);
    for (int i = 0; i < MB; ++i) acc[r][i] = _mm256_fmadd_ps(wv, xv[i], acc[r][i]);
  }
}

// y[i][r] = x_i · w_r for R weight rows (w, row stride ldwb bytes) and MB rows of x: one pass
// over k with R*MB vector accumulators; the k % 8 tail goes through zero-padded copies.
template <DType WT, int R, int MB>
inline void block(const float* x, int64_t ldx, const unsigned char* w, int64_t ldwb, float* y, int64_t ldy,
                  int64_t k) {
  __m256 acc[R][MB];
  for (int r = 0; r < R; ++r)
    for (int i = 0; i < MB; ++i) acc[r][i] = _mm256_setzero_ps();
  const int64_t k8 = k & ~int64_t(7);
  for (int64_t kk = 0; kk < k8; kk += 8) fma_step<WT, R, MB>(acc, x, ldx, w, ldwb, kk);
  if (k8 < k) {
    constexpr int kB = Weights<WT>::kBytes;
    const int64_t tail = k - k8;
    alignas(32) float xt[MB][8] = {};
    alignas(32) unsigned char wt[R][8 * kB] = {};
    for (int i = 0; i < MB; ++i) std::memcpy(xt[i], x + i * ldx + k8, size_t(tail) * 4);
    for (int r = 0; r < R; ++r) std::memcpy(wt[r], w + r * ldwb + k8 * kB, size_t(tail) * kB);
    fma_step<WT, R, MB>(acc, &xt[0][0], 8, &wt[0][0], 8 * kB, 0);
  }
  if constexpr (R % 4 == 0) {
    for (int i = 0; i < MB; ++i)
      for (int r = 0; r < R; r += 4)
        _mm_storeu_ps(y + i * ldy + r, sum4(acc[r][i], acc[r + 1][i], acc[r + 2][i], acc[r + 3][i]));
  } else {
    for (int i = 0; i < MB; ++i)
      for (int r = 0; r < R; ++r) y[i * ldy + r] = sum1(acc[r][i]);
  }
}

// All m rows of x against R weight rows: blocks of kMB rows of x, then the remainder.
// kMB = 3 with R = 4 keeps 12 accumulators + 3 x vectors + 1 weight vector in the 16 ymm
// registers (measured best of 4x2, 4x3, 2x6 on Zen 3).
template <DType WT, int R>
inline void row_block(const GemmArgs& a, const unsigned char* w, int64_t ldwb, int64_t j) {
  constexpr int kMB = 3;
  const float* x = a.x;
  float* y = a.y + j;
  int64_t i = 0;
  for (; i + kMB <= a.m; i += kMB) block<WT, R, kMB>(x + i * a.ldx, a.ldx, w, ldwb, y + i * a.ldy, a.ldy, a.k);
  switch (a.m - i) {
    case 2: block<WT, R, 2>(x + i * a.ldx, a.ldx, w, ldwb, y + i * a.ldy, a.ldy, a.k); break;
    case 1: block<WT, R, 1>(x + i * a.ldx, a.ldx, w, ldwb, y + i * a.ldy, a.ldy, a.k); break;
    default: break;
  }
}

template <DType WT>
void rows_typed(const GemmArgs& a, int64_t n0, int64_t n1) {
  constexpr int kB = Weights<WT>::kBytes;
  const int64_t ldwb = a.ldw * kB;
  const auto* w = static_cast<const unsigned char*>(a.w);
  int64_t j = n0;
  if (a.m == 1) {  // one row of x: 8 weight rows in flight (8 independent FMA chains)
    for (; j + 8 <= n1; j += 8) block<WT, 8, 1>(a.x, a.ldx, w + j * ldwb, ldwb, a.y + j, a.ldy, a.k);
  }
  for (; j + 4 <= n1; j += 4) row_block<WT, 4>(a, w + j * ldwb, ldwb, j);
  for (; j < n1; ++j) row_block<WT, 1>(a, w + j * ldwb, ldwb, j);
}

template <DType WT>
void widen_typed(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  constexpr int kB = Weights<WT>::kBytes;
  const int64_t k = a.k, k8 = k & ~int64_t(7);
  for (int64_t r = 0; r < rows; ++r) {
    const auto* src = static_cast<const unsigned char*>(a.w) + (r0 + r) * a.ldw * kB;
    float* dst = out + r * k;
    int64_t kk = 0;
    for (; kk < k8; kk += 8) _mm256_storeu_ps(dst + kk, Weights<WT>::load8(src + kk * kB));
    if (kk < k) {
      alignas(32) unsigned char t[8 * kB] = {};
      alignas(32) float f[8];
      std::memcpy(t, src + kk * kB, size_t(k - kk) * kB);
      _mm256_store_ps(f, Weights<WT>::load8(t));
      std::memcpy(dst + kk, f, size_t(k - kk) * 4);
    }
  }
}

}  // namespace

void rows_avx2(const GemmArgs& a, int64_t n0, int64_t n1) {
  switch (a.wtype) {
    case DType::F32: rows_typed<DType::F32>(a, n0, n1); break;
    case DType::BF16: rows_typed<DType::BF16>(a, n0, n1); break;
    case DType::F16: rows_typed<DType::F16>(a, n0, n1); break;
    default: break;  // rejected by gemm_nt
  }
}

void widen_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  switch (a.wtype) {
    case DType::F32: widen_typed<DType::F32>(a, r0, rows, out); break;
    case DType::BF16: widen_typed<DType::BF16>(a, r0, rows, out); break;
    case DType::F16: widen_typed<DType::F16>(a, r0, rows, out); break;
    default: break;
  }
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX2
