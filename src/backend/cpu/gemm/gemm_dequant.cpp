// Quantized weights with fp32 scales, dequantized a few rows at a time into fp32 for gemm.cpp's
// kernels: fp8 (e4m3) as value * scale, 4-bit integers as (value - zero) * scale (value - zero is
// an exact small integer), one rounding each, so the result equals a checkpoint dequantized ahead
// (tools' --dequantize twin) bit for bit. A row is walked one scale group at a time, so the inner
// loop is a plain vector loop with one scale (and zero).
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

// Calls seg(c0, c1, i) for the column ranges of weight row r that share a scale (and zero):
// a.scales[i], a.zeros[i].
template <typename Seg>
inline void for_each_group(const GemmArgs& a, int64_t r, Seg&& seg) {
  for (int64_t c = 0; c < a.k;) {
    const int64_t g = (c + a.phase) / a.group;
    const int64_t end = std::min(a.k, (g + 1) * a.group - a.phase);
    seg(c, end, r * a.groups + g);
    c = end;
  }
}

inline float int4_at(const uint8_t* row, int64_t c) { return float((row[c >> 1] >> (4 * (c & 1))) & 0xf); }

}  // namespace

void dequant_int4_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i], z = a.zeros[i];
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dst[c] = (int4_at(src, c) - z) * s;
    });
  }
}

void dequant_fp8_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i];
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

// Eight 4-bit values from column kk (a multiple of 8) of a row packed two a byte, as fp32.
inline __m256 int4x8(const uint8_t* row, int64_t kk) {
  uint32_t raw;
  std::memcpy(&raw, row + kk / 2, 4);
  const __m256i nib = _mm256_srlv_epi32(_mm256_set1_epi32(int(raw)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
  return _mm256_cvtepi32_ps(_mm256_and_si256(nib, _mm256_set1_epi32(0xf)));
}

// How the m = 1 kernel reads one weight type: 8 dequantized weights of row r at column kk, with
// the group's scale (and zero) in registers; bytes(c): the bytes of a row's first c columns.
struct Fp8Rows {
  static int64_t bytes(int64_t c) { return c; }
  static __m256 load(const uint8_t* row, int64_t kk) { return fp8x8(row + kk); }
  static __m256 dequant(__m256 v, __m256 scale, __m256) { return _mm256_mul_ps(v, scale); }
};
struct Int4Rows {
  static int64_t bytes(int64_t c) { return (c + 1) / 2; }
  static __m256 load(const uint8_t* row, int64_t kk) { return int4x8(row, kk); }
  static __m256 dequant(__m256 v, __m256 scale, __m256 zero) { return _mm256_mul_ps(_mm256_sub_ps(v, zero), scale); }
};

// One row of x against R quantized weight rows from row j, dequantized in registers: the same
// weights (as dequant_*_avx2 computes them) met in the same order of FMAs and lane sums as
// gemm_avx2.cpp's fp32 block kernel (blocks of 4 rows, or 1, one row of x, one pass over k, the
// k % 8 tail zero-padded; R = 8 is two such blocks side by side, for more independent FMA chains),
// so the result is that kernel's on the dequantized slice to the last bit, at one byte (fp8) or
// half a byte (int4) read per weight. Scale groups must start on 8-column boundaries. pf: the next
// block's rows, prefetched.
template <int R, class Rows>
inline void quant_block_m1(const GemmArgs& a, int64_t j, const uint8_t* pf) {
  const auto* w = static_cast<const uint8_t*>(a.w) + j * a.ldw;
  const float* sc = a.scales + j * a.groups;
  const float* zp = a.zeros ? a.zeros + j * a.groups : nullptr;
  __m256 acc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t k8 = a.k & ~int64_t(7);
  auto group_params = [&](int64_t g, __m256 (&sv)[R], __m256 (&zv)[R]) __attribute__((always_inline)) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      sv[r] = _mm256_set1_ps(sc[r * a.groups + g]);
      zv[r] = zp ? _mm256_set1_ps(zp[r * a.groups + g]) : _mm256_setzero_ps();
    }
  };
  for (int64_t c = 0; c < k8;) {
    const int64_t g = (c + a.phase) / a.group, end = std::min(k8, (g + 1) * a.group - a.phase);
    __m256 sv[R], zv[R];
    group_params(g, sv, zv);
    for (int64_t kk = c; kk < end; kk += 8) {
      if (kk % 64 == 0) {
        #pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(pf + r * a.ldw + Rows::bytes(kk)), _MM_HINT_T0);
      }
      const __m256 xv = _mm256_loadu_ps(a.x + kk);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r] = _mm256_fmadd_ps(Rows::dequant(Rows::load(w + r * a.ldw, kk), sv[r], zv[r]), xv, acc[r]);
    }
    c = end;
  }
  if (k8 < a.k) {
    const int64_t tail = a.k - k8;
    __m256 sv[R], zv[R];
    group_params((k8 + a.phase) / a.group, sv, zv);
    alignas(32) float xt[8] = {};
    std::memcpy(xt, a.x + k8, size_t(tail) * 4);
    const __m256 xv = _mm256_load_ps(xt);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      uint8_t wt[8] = {};  // the row's bytes from column k8 (zero past its end)
      std::memcpy(wt, w + r * a.ldw + Rows::bytes(k8), size_t(Rows::bytes(a.k) - Rows::bytes(k8)));
      acc[r] = _mm256_fmadd_ps(Rows::dequant(Rows::load(wt, 0), sv[r], zv[r]), xv, acc[r]);
    }
  }
  if constexpr (R % 4 == 0) {
    #pragma GCC unroll 2
    for (int r = 0; r < R; r += 4) _mm_storeu_ps(a.y + j + r, sum4(acc[r], acc[r + 1], acc[r + 2], acc[r + 3]));
  } else {
    a.y[j] = sum1(acc[0]) + 0.0f;  // as the fp32 kernel writes a lone row (-0 becomes +0)
  }
}

template <class Rows>
void quant_rows_m1(const GemmArgs& a, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint8_t*>(a.w);
  int64_t j = n0;
  for (; j + 8 <= n1; j += 8) quant_block_m1<8, Rows>(a, j, w + (j + 16 <= n1 ? j + 8 : j) * a.ldw);
  for (; j + 4 <= n1; j += 4) quant_block_m1<4, Rows>(a, j, w + (j + 8 <= n1 ? j + 4 : j) * a.ldw);
  for (; j < n1; ++j) quant_block_m1<1, Rows>(a, j, w + j * a.ldw);
}

}  // namespace

bool quant_rows_m1_avx2_takes(const GemmArgs& a) { return a.m == 1 && a.group % 8 == 0 && a.phase % 8 == 0; }

void quant_rows_m1_avx2(const GemmArgs& a, int64_t n0, int64_t n1) {
  if (a.wtype == DType::I4)
    quant_rows_m1<Int4Rows>(a, n0, n1);
  else
    quant_rows_m1<Fp8Rows>(a, n0, n1);
}

void dequant_int4_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i], z = a.zeros[i];
      const __m256 sv = _mm256_set1_ps(s), zv = _mm256_set1_ps(z);
      int64_t c = c0;
      for (; c < c1 && c % 8 != 0; ++c) dst[c] = (int4_at(src, c) - z) * s;
      for (; c + 8 <= c1; c += 8) _mm256_storeu_ps(dst + c, Int4Rows::dequant(int4x8(src, c), sv, zv));
      for (; c < c1; ++c) dst[c] = (int4_at(src, c) - z) * s;
    });
  }
}

void dequant_fp8_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  const __m256i low7 = _mm256_set1_epi32(0x7f), top = _mm256_set1_epi32(0x80);
  const __m256 rebias = _mm256_set1_ps(0x1.0p120f), nan = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i];
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
