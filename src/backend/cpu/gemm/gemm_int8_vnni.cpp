// W8A8 on AVX512-VNNI: vpdpbusd sums four unsigned-byte x signed-byte products into each int32
// lane. The weights are the signed operand's natural home, but x is already signed too, so the
// weights go in as unsigned w + 128 (w xor 0x80, one op per 64 weights) against the signed x,
// and 128 * sum(q) -- known per row of x -- is taken off the total:
//   sum (w + 128) * q = sum w * q + 128 * sum q.
// The lanes wrap modulo 2^32 where the offset sum would pass int32 (k near gemm.h's limit); the
// corrected total fits, so wrapping arithmetic gives it exactly. Blocks of 4 weight rows, each
// row of x against them while they sit in L1; the k % 64 tail by masked loads (zero bytes add 0).
// One row of x (a sequence decoding) reads the weight rows one after another instead, one
// sequential stream with no software prefetch: on a Zen 4 (tpbatch_quantized_gemv_bench
// --threads 1, 3072 x 768) the 4-row blocks streamed 9-10 GB/s where the kernel's arithmetic
// (--hot 1) runs at 58, and the single stream reaches 21-23 GB/s, the bf16 widening kernel's rate.
// As in gemm_avx512.cpp, every standard header comes BEFORE the target pragma.
#include <cstdint>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX512)
#include "backend/cpu/gemm/avx512_intrinsics.h"  // <immintrin.h>, without GCC 12's false warnings

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

namespace tpbatch::cpu::detail {
namespace {

template <int R, bool PF>
inline void int8_block(const Int8Args& a, int64_t j) {
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const int64_t k64 = a.k & ~int64_t(63);
  const __mmask64 tail = a.k > k64 ? (~__mmask64{0}) >> (64 - (a.k - k64)) : 0;
  const int8_t* w = a.w + j * a.k;
  for (int64_t i = 0; i < a.m; ++i) {
    const int8_t* q = a.xq + i * a.k;
    __m512i acc[R];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_si512();
    for (int64_t c = 0; c < k64; c += 64) {
      const __m512i xv = _mm512_loadu_si512(q + c);
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        // The next block's rows, a cache line each step (the fp8 / int4 m = 1 kernels do the same).
        if (PF && i == 0) _mm_prefetch(reinterpret_cast<const char*>(w + (R + r) * a.k + c), _MM_HINT_T0);
        const __m512i wv = _mm512_xor_si512(_mm512_loadu_si512(w + r * a.k + c), flip);
        acc[r] = _mm512_dpbusd_epi32(acc[r], wv, xv);
      }
    }
    if (tail) {
      const __m512i xv = _mm512_maskz_loadu_epi8(tail, q + k64);
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m512i wv = _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, w + r * a.k + k64), flip);
        acc[r] = _mm512_dpbusd_epi32(acc[r], wv, xv);
      }
    }
    const uint32_t offset = uint32_t(a.xsum[i]) * 128u;
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      const int32_t dot = int32_t(uint32_t(_mm512_reduce_add_epi32(acc[r])) - offset);
      a.y[i * a.ldy + j + r] = float(dot) * a.xscale[i] * a.wscale[j + r];
    }
  }
}

}  // namespace

void int8_rows_vnni(const Int8Args& a, int64_t n0, int64_t n1) {
  int64_t j = n0;
  if (a.m > 1)
    for (; j + 4 <= n1; j += 4) int8_block<4, true>(a, j);
  for (; j < n1; ++j) int8_block<1, false>(a, j);
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
