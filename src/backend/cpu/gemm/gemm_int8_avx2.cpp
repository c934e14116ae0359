// W8A8 on AVX2, for CPUs without AVX512-VNNI (a Zen 3, say). vpmaddubsw multiplies unsigned by
// signed bytes and adds pairs into int16 lanes, saturating; vpmaddwd then adds pairs of those into
// int32. The weights go in as |w| (0..128, unsigned: |-128| = 128 fits a byte) and x takes their
// sign (vpsignb: q * sign(w), and |q| <= 127 so negating it never wraps), so each product is
// |w| * (q * sign(w)) = w * q and a pair sums to at most 2 * 128 * 127 = 32512: the int16 lanes
// never saturate and the int32 totals are the portable kernel's exactly. Blocks of 4 weight rows
// share each x load; one row of x (a sequence decoding) reads the weight rows one after another, a
// single stream, as the VNNI kernel does. The k % 32 tail is summed in scalar code.
// On a Zen 3 (tpbatch_quantized_gemv_bench --threads 1, 3072 x 768, m = 1): 176 us a call, 13.5
// GB/s, 2.08x the bf16 GEMV (the bytes allow 1.99x); 83 us with the weights in cache, where the
// x86-64-v2 portable loop that such CPUs ran before takes about 400 (5.7 GB/s: slower than bf16).
// As in gemm_avx2.cpp, every standard header comes BEFORE the target pragma.
#include <cstdint>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX2)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2")

namespace tpbatch::cpu::detail {
namespace {

inline __m256i dot32(__m256i acc, __m256i wv, __m256i xv) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
}

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

template <int R>
inline void int8_block(const Int8Args& a, int64_t j) {
  const int64_t k32 = a.k & ~int64_t(31);
  const int8_t* w = a.w + j * a.k;
  for (int64_t i = 0; i < a.m; ++i) {
    const int8_t* q = a.xq + i * a.k;
    __m256i acc[R];
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
    for (int64_t c = 0; c < k32; c += 32) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + c));
      #pragma GCC unroll 4
      for (int r = 0; r < R; ++r)
        acc[r] = dot32(acc[r], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + r * a.k + c)), xv);
    }
    #pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      int32_t dot = hsum(acc[r]);
      for (int64_t c = k32; c < a.k; ++c) dot += int32_t(q[c]) * int32_t(w[r * a.k + c]);
      a.y[i * a.ldy + j + r] = float(dot) * a.xscale[i] * a.wscale[j + r];
    }
  }
}

}  // namespace

void int8_rows_avx2(const Int8Args& a, int64_t n0, int64_t n1) {
  int64_t j = n0;
  if (a.m > 1)
    for (; j + 4 <= n1; j += 4) int8_block<4>(a, j);
  for (; j < n1; ++j) int8_block<1>(a, j);
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX2
