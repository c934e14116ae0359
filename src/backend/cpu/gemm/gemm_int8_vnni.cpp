// W8A8 on AVX512-VNNI: vpdpbusd sums four unsigned-byte x signed-byte products into each int32
// lane. The weights are the signed operand's natural home, but x is already signed too, so the
// weights go in as unsigned w + 128 (w xor 0x80, one op per 64 weights) against the signed x,
// and 128 * sum(q) -- known per row of x -- is taken off the total:
//   sum (w + 128) * q = sum w * q + 128 * sum q.
// The lanes wrap modulo 2^32 where the offset sum would pass int32 (k near gemm.h's limit); the
// corrected total fits, so wrapping arithmetic gives it exactly. The k % 64 tail by masked loads
// (zero bytes add 0). Several rows of x go in tiles of 4 weight rows (int8_tile, below). One row of
// x (a sequence decoding) reads the weight rows one after another, one sequential stream with no
// software prefetch: on a Zen 4 (tpbatch_quantized_gemv_bench --threads 1, 3072 x 768) 4-row blocks
// streamed 9-10 GB/s where the kernel's arithmetic (--hot 1) runs at 58, and the single stream
// reaches 21-23 GB/s, the bf16 widening kernel's rate.
// As in gemm_avx512.cpp, every standard header comes BEFORE the target pragma.
#include <cstdint>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX512)
#include "backend/cpu/gemm/avx512_intrinsics.h"  // <immintrin.h>, without GCC 12's false warnings

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni")

namespace tpbatch::cpu::detail {
namespace {

// Weight row j against every row of x, read as one sequential stream (see the top).
inline void int8_row(const Int8Args& a, int64_t j) {
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const int64_t k64 = a.k & ~int64_t(63);
  const __mmask64 tail = a.k > k64 ? (~__mmask64{0}) >> (64 - (a.k - k64)) : 0;
  const int8_t* w = a.w + j * a.k;
  for (int64_t i = 0; i < a.m; ++i) {
    const int8_t* q = a.xq + i * a.k;
    __m512i acc = _mm512_setzero_si512();
    for (int64_t c = 0; c < k64; c += 64)
      acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(_mm512_loadu_si512(w + c), flip), _mm512_loadu_si512(q + c));
    if (tail)
      acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(_mm512_maskz_loadu_epi8(tail, w + k64), flip),
                                _mm512_maskz_loadu_epi8(tail, q + k64));
    const int32_t dot = int32_t(uint32_t(_mm512_reduce_add_epi32(acc)) - uint32_t(a.xsum[i]) * 128u);
    a.y[i * a.ldy + j] = float(dot) * a.xscale[i] * a.wscale[j];
  }
}

// Several rows of x (decode batches, prefill): MB rows of x against R = 4 weight rows, each weight
// vector loaded and flipped once for all MB rows, and the 4 sums of a row of x reduced together
// (one transposing tree instead of a whole horizontal sum per output): per 64 columns 4 loads and
// flips of weights, MB loads of x and 4 MB vpdpbusd. Integer sums, so the same integers as above.
template <int MB>
inline void int8_tile(const Int8Args& a, int64_t j, int64_t i0) {
  constexpr int R = 4;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const int64_t k64 = a.k & ~int64_t(63);
  const __mmask64 tail = a.k > k64 ? (~__mmask64{0}) >> (64 - (a.k - k64)) : 0;
  const int8_t* w = a.w + j * a.k;
  const int8_t* q = a.xq + i0 * a.k;
  __m512i acc[MB][R];
  #pragma GCC unroll 4
  for (int i = 0; i < MB; ++i)
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_si512();
  auto step = [&](__mmask64 mask, int64_t c) __attribute__((always_inline)) {
    __m512i wv[R];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) wv[r] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(mask, w + r * a.k + c), flip);
    #pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) {
      const __m512i xv = _mm512_maskz_loadu_epi8(mask, q + i * a.k + c);
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[i][r] = _mm512_dpbusd_epi32(acc[i][r], wv[r], xv);
    }
  };
  for (int64_t c = 0; c < k64; c += 64) step(~__mmask64{0}, c);
  if (tail) step(tail, k64);  // zero bytes add 0
  const __m128 wscale = _mm_loadu_ps(a.wscale + j);
  #pragma GCC unroll 4
  for (int i = 0; i < MB; ++i) {
    // Lane r of `sums`: the total of acc[i][r]'s 16 lanes (modulo 2^32, as the sums wrap).
    const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[i][0], acc[i][1]),
                                         _mm512_unpackhi_epi32(acc[i][0], acc[i][1]));
    const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[i][2], acc[i][3]),
                                         _mm512_unpackhi_epi32(acc[i][2], acc[i][3]));
    const __m512i s0123 = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
    const __m256i half = _mm256_add_epi32(_mm512_castsi512_si256(s0123), _mm512_extracti64x4_epi64(s0123, 1));
    const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
    const __m128i dot = _mm_sub_epi32(sums, _mm_set1_epi32(int32_t(uint32_t(a.xsum[i0 + i]) * 128u)));
    const __m128 y = _mm_mul_ps(_mm_mul_ps(_mm_cvtepi32_ps(dot), _mm_set1_ps(a.xscale[i0 + i])), wscale);
    _mm_storeu_ps(a.y + (i0 + i) * a.ldy + j, y);
  }
}

}  // namespace

void int8_rows_vnni(const Int8Args& a, int64_t n0, int64_t n1) {
  int64_t j = n0;
  if (a.m > 1)
    for (; j + 4 <= n1; j += 4)
      for (int64_t i = 0; i < a.m;) {
        const int64_t left = a.m - i;
        if (left >= 4) int8_tile<4>(a, j, i), i += 4;
        else if (left == 3) int8_tile<3>(a, j, i), i += 3;
        else if (left == 2) int8_tile<2>(a, j, i), i += 2;
        else int8_tile<1>(a, j, i), i += 1;
      }
  for (; j < n1; ++j) int8_row(a, j);
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
