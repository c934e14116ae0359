#pragma once
// The m = 1 kernel of quantized weights (fp8, 4-bit), shared by the AVX2 (gemm_dequant.cpp) and
// AVX-512VL (gemm_dequant_avx512.cpp) files: include it after the file's target pragma, so it is
// compiled for that ISA. A `Rows` policy says how to read a weight type:
//   bytes(c): the bytes of a row's first c columns;
//   load(row, kk): 8 values from column kk (a multiple of 8), in whatever form dequant takes;
//   group(s, z, p0, p1): a scale group's two parameter vectors from its scale and zero point (0
//     for fp8);
//   dequant(v, p0, p1): the 8 weights, exactly as the dequantize-ahead path computes them.
#include <immintrin.h>

#include "backend/cpu/gemm/avx2_sums.h"
#include "backend/cpu/gemm/gemm_kernels.h"

namespace tpbatch::cpu::detail {
namespace {

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

}  // namespace
}  // namespace tpbatch::cpu::detail
