// 4-bit weights, one row of x, on AVX-512VL, exact: the result equals gemm_avx2.cpp's fp32
// row-blocked kernel on the dequantized weights to the last bit (the same FMAs and lane sums, in
// ymm registers for the same 8-lane order), while each weight is a table lookup: a scale group's
// 16 weights (q - zero) * scale, q = 0..15, are computed once (dequant_int4_avx2's very operations,
// so the same values whatever the zero point) into two ymm registers, and vpermt2ps picks each
// weight by its nibble, which needs no mask (it reads the index's low 4 bits). Per 8 weights: a
// broadcast load, a shift, the lookup and the FMA, against a mask, a conversion, a subtraction and
// a multiplication more when dequantizing (on a Zen 4, tpbatch_quantized_gemv_bench --threads 1
// --hot 1: 146 -> 109 us on the 3072 x 768 shape). AVX2-only CPUs run gemm_quant_m1_avx2.cpp's
// kernel instead, which applies the scales per group (not exact).
// As in gemm_avx512.cpp, every standard header comes BEFORE the target pragma.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX512)
#include "backend/cpu/gemm/avx512_intrinsics.h"  // <immintrin.h>, without GCC 12's false warnings

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "backend/cpu/gemm/avx2_sums.h"  // after the pragma: compiled for this ISA

namespace tpbatch::cpu::detail {
namespace {

// One row of x against R 4-bit weight rows from row j, dequantized in registers: the same weights
// met in the same order of FMAs and lane sums as gemm_avx2.cpp's fp32 block kernel (blocks of 4
// rows, or 1, one row of x, one pass over k, the k % 8 tail zero-padded; R = 8 is two such blocks
// side by side, for more independent FMA chains), at half a byte read per weight. Scale groups
// must start on 8-column boundaries. pf: the next block's rows, prefetched.
template <int R, class Rows>
inline void quant_block_m1(const GemmArgs& a, int64_t j, const uint8_t* pf) {
  const auto* w = static_cast<const uint8_t*>(a.w) + j * a.ldw;
  const float* sc = a.scales + j * a.groups;
  const float* zp = a.zeros ? a.zeros + j * a.groups : nullptr;
  __m256 acc[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  const int64_t k8 = a.k & ~int64_t(7);
  // Each row's scale group parameters (Rows::group: scale and zero, or a 4-bit lookup table).
  auto group_params = [&](int64_t g, __m256 (&p0)[R], __m256 (&p1)[R]) __attribute__((always_inline)) {
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      Rows::group(sc[r * a.groups + g], zp ? zp[r * a.groups + g] : 0.0f, p0[r], p1[r]);
    }
  };
  for (int64_t c = 0; c < k8;) {
    const int64_t g = (c + a.phase) / a.group, end = std::min(k8, (g + 1) * a.group - a.phase);
    __m256 p0[R], p1[R];
    group_params(g, p0, p1);
    for (int64_t kk = c; kk < end; kk += 8) {
      // The next block's R rows (contiguous), a line per 8 columns in address order: it is at
      // most as many lines as this block has 8-column steps (a byte or half a byte a weight).
      // Spread over the rows side by side instead (line c of each row at column c), the same
      // prefetches left fp8 streaming at 8 GB/s on a Zen 4, against 12 in address order
      // (tpbatch_quantized_gemv_bench --threads 1; compute alone, --hot 1, is 12).
      if (kk / 8 * 64 < R * a.ldw) _mm_prefetch(reinterpret_cast<const char*>(pf + kk / 8 * 64), _MM_HINT_T0);
      const __m256 xv = _mm256_loadu_ps(a.x + kk);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        acc[r] = _mm256_fmadd_ps(Rows::dequant(Rows::load(w + r * a.ldw, kk), p0[r], p1[r]), xv, acc[r]);
    }
    c = end;
  }
  if (k8 < a.k) {
    const int64_t tail = a.k - k8;
    __m256 p0[R], p1[R];
    group_params((k8 + a.phase) / a.group, p0, p1);
    alignas(32) float xt[8] = {};
    std::memcpy(xt, a.x + k8, size_t(tail) * 4);
    const __m256 xv = _mm256_load_ps(xt);
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      uint8_t wt[8] = {};  // the row's bytes from column k8 (zero past its end)
      std::memcpy(wt, w + r * a.ldw + Rows::bytes(k8), size_t(Rows::bytes(a.k) - Rows::bytes(k8)));
      acc[r] = _mm256_fmadd_ps(Rows::dequant(Rows::load(wt, 0), p0[r], p1[r]), xv, acc[r]);
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

// How quant_block_m1 reads 4-bit weights:
//   load(row, kk): the 8 nibbles from column kk (a multiple of 8);
//   group(s, z, p0, p1): a scale group's lookup table, its 16 weights from its scale and zero;
//   dequant(v, p0, p1): the 8 weights, exactly as the dequantize-ahead path computes them.
struct Int4RowsVl {
  static int64_t bytes(int64_t c) { return (c + 1) / 2; }
  // The 8 nibbles from column kk, each in the low bits of its lane (higher bits: the nibbles after it).
  static __m256 load(const uint8_t* row, int64_t kk) {
    uint32_t raw;
    std::memcpy(&raw, row + kk / 2, 4);
    return _mm256_castsi256_ps(
        _mm256_srlv_epi32(_mm256_set1_epi32(int(raw)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)));
  }
  static void group(float s, float z, __m256& q0_7, __m256& q8_15) {
    const __m256 sv = _mm256_set1_ps(s), zv = _mm256_set1_ps(z);
    q0_7 = _mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), zv), sv);
    q8_15 = _mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15), zv), sv);
  }
  static __m256 dequant(__m256 nibbles, __m256 q0_7, __m256 q8_15) {
    return _mm256_permutex2var_ps(q0_7, _mm256_castps_si256(nibbles), q8_15);
  }
};

}  // namespace

bool int4_rows_m1_avx512(const GemmArgs& a, int64_t n0, int64_t n1) {
  if (a.m != 1 || a.group % 8 != 0 || a.phase % 8 != 0) return false;
  quant_rows_m1<Int4RowsVl>(a, n0, n1);
  return true;
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
