// fp8 (e4m3) weights with fp32 scales, dequantized a few rows at a time into fp32 for gemm.cpp's
// kernels: value * scale, one fp32 multiply, so the result equals a checkpoint dequantized ahead
// (tools' --dequantize twin) bit for bit. A row is walked one scale group at a time, so the inner
// loop is a plain vector loop with one scale.
//
// e4m3 -> fp32: the 7 exponent and mantissa bits moved to fp32's places and multiplied by 2^120
// (the bias 7 -> 127), exact for subnormals too; 0x7f / 0xff are NaN (dtype.cpp's f8e4m3_to_f32).
// As in gemm_avx2.cpp, every standard header comes BEFORE the target pragma.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backend/cpu/gemm/gemm_kernels.h"

namespace tpbatch::cpu::detail {
namespace {

inline float fp8_portable(uint8_t b) {
  const uint32_t mag = b & 0x7fu;
  uint32_t bits = mag << 20;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 0x1.0p120f;
  std::memcpy(&bits, &f, 4);
  bits |= uint32_t(b & 0x80u) << 24;
  bits = mag == 0x7fu ? 0x7fc00000u : bits;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Calls seg(c0, c1, scale) for the column ranges of weight row r that share a scale.
template <typename Seg>
inline void for_each_group(const GemmArgs& a, int64_t r, Seg&& seg) {
  const float* sc = a.scales + r * a.groups;
  for (int64_t c = 0; c < a.k;) {
    const int64_t g = (c + a.phase) / a.group;
    const int64_t end = std::min(a.k, (g + 1) * a.group - a.phase);
    seg(c, end, sc[g]);
    c = end;
  }
}

}  // namespace

void dequant_fp8_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, float s) {
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dst[c] = fp8_portable(src[c]) * s;
    });
  }
}

}  // namespace tpbatch::cpu::detail

#if defined(TPBATCH_GEMM_HAVE_AVX2)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "backend/cpu/gemm/avx2_sums.h"  // after the pragma: compiled for this ISA

namespace tpbatch::cpu::detail {
namespace {

// Eight e4m3 values as fp32 (unscaled).
inline __m256 fp8x8(const uint8_t* p) {
  const __m256i low7 = _mm256_set1_epi32(0x7f), top = _mm256_set1_epi32(0x80);
  int64_t raw;
  std::memcpy(&raw, p, 8);
  const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(raw));
  const __m256i mag = _mm256_and_si256(v, low7);
  __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, 20)), _mm256_set1_ps(0x1.0p120f));
  f = _mm256_or_ps(f, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(v, top), 24)));
  return _mm256_blendv_ps(f, _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN()),
                          _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, low7)));
}

// One row of x against R fp8 weight rows from row j, dequantized in registers: the same weights
// (value * scale) met in the same order of FMAs and lane sums as gemm_avx2.cpp's fp32 block
// kernel (blocks of 4 rows, or 1, one row of x, one pass over k, the k % 8 tail zero-padded; R = 8
// is two such blocks side by side, for more independent FMA chains), so the
// result is that kernel's on the dequantized slice to the last bit, at one byte read per weight.
// Scale groups must start on 8-column boundaries. pf: the next block's rows, prefetched.
template <int R>
inline void fp8_block_m1(const GemmArgs& a, int64_t j, const uint8_t* pf) {
  const auto* w = static_cast<const uint8_t*>(a.w) + j * a.ldw;
  const float* sc = a.scales + j * a.groups;
  __m256 acc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t k8 = a.k & ~int64_t(7);
  auto group_scales = [&](int64_t g, __m256 (&sv)[R]) __attribute__((always_inline)) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) sv[r] = _mm256_set1_ps(sc[r * a.groups + g]);
  };
  for (int64_t c = 0; c < k8;) {
    const int64_t g = (c + a.phase) / a.group, end = std::min(k8, (g + 1) * a.group - a.phase);
    __m256 sv[R];
    group_scales(g, sv);
    for (int64_t kk = c; kk < end; kk += 8) {
      if (kk % 64 == 0) {
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(pf + r * a.ldw + kk), _MM_HINT_T0);
      }
      const __m256 xv = _mm256_loadu_ps(a.x + kk);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(fp8x8(w + r * a.ldw + kk), sv[r]), xv, acc[r]);
    }
    c = end;
  }
  if (k8 < a.k) {
    const int64_t tail = a.k - k8;
    __m256 sv[R];
    group_scales((k8 + a.phase) / a.group, sv);
    alignas(32) float xt[8] = {};
    std::memcpy(xt, a.x + k8, size_t(tail) * 4);
    const __m256 xv = _mm256_load_ps(xt);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      uint8_t wt[8] = {};
      std::memcpy(wt, w + r * a.ldw + k8, size_t(tail));
      acc[r] = _mm256_fmadd_ps(_mm256_mul_ps(fp8x8(wt), sv[r]), xv, acc[r]);
    }
  }
  if constexpr (R % 4 == 0) {
    #pragma GCC unroll 2
    for (int r = 0; r < R; r += 4) _mm_storeu_ps(a.y + j + r, sum4(acc[r], acc[r + 1], acc[r + 2], acc[r + 3]));
  } else {
    a.y[j] = sum1(acc[0]) + 0.0f;  // as the fp32 kernel writes a lone row (-0 becomes +0)
  }
}

}  // namespace

bool fp8_rows_m1_avx2_takes(const GemmArgs& a) { return a.m == 1 && a.group % 8 == 0 && a.phase % 8 == 0; }

void fp8_rows_m1_avx2(const GemmArgs& a, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint8_t*>(a.w);
  int64_t j = n0;
  for (; j + 8 <= n1; j += 8) fp8_block_m1<8>(a, j, w + (j + 16 <= n1 ? j + 8 : j) * a.ldw);
  for (; j + 4 <= n1; j += 4) fp8_block_m1<4>(a, j, w + (j + 8 <= n1 ? j + 4 : j) * a.ldw);
  for (; j < n1; ++j) fp8_block_m1<1>(a, j, w + j * a.ldw);
}

void dequant_fp8_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  const __m256i low7 = _mm256_set1_epi32(0x7f), top = _mm256_set1_epi32(0x80);
  const __m256 rebias = _mm256_set1_ps(0x1.0p120f), nan = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, float s) {
      const __m256 sv = _mm256_set1_ps(s);
      int64_t c = c0;
      for (; c + 8 <= c1; c += 8) {
        int64_t raw;
        std::memcpy(&raw, src + c, 8);
        const __m256i v = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(raw));
        const __m256i mag = _mm256_and_si256(v, low7);
        __m256 f = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, 20)), rebias);
        f = _mm256_or_ps(f, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(v, top), 24)));
        f = _mm256_blendv_ps(f, nan, _mm256_castsi256_ps(_mm256_cmpeq_epi32(mag, low7)));
        _mm256_storeu_ps(dst + c, _mm256_mul_ps(f, sv));
      }
      for (; c < c1; ++c) dst[c] = fp8_portable(src[c]) * s;
    });
  }
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX2
