// bf16 weights computed natively on AVX512_BF16 CPUs, for decode steps of a few rows: vdpbf16ps
// multiplies pairs of bf16 and accumulates in fp32, 32 products per instruction, with no widening
// of the weights.
//
// vdpbf16ps takes both operands in bf16, so the fp32 activations are split into three bf16 terms,
// x = hi + mid + lo, exact to fp32's own rounding (|x - hi - mid - lo| <= 2^-24 |x|), and each
// weight meets all three: the result is fp32 arithmetic on the widened weights up to summation
// order, as on every other path. (Two terms, 16 significant bits, were measured to move a
// generated model's logprobs by 1.03e-4 against the widened copy; three keep it to summation order.)
// vdpbf16ps reads subnormal bf16 as zero: weights below 2^-126 in magnitude count as 0.
//
// Why only one row, and only beside AMX (gemm.cpp's Auto; AMX tiles from m = 2): one row of x is bound by
// the weight stream, and here this kernel streams bf16 weights at the read bandwidth (measured on a Sapphire-Rapids-class
// Xeon, tpbatch_gemm_bench --threads 1 --path row-blocked, m = 1: 12-14 GB/s against 11 GB/s for
// the AVX2 widening kernel, 0.8-1.0x the machine's streaming read). From a few rows on the step is
// compute-bound, and there vdpbf16ps loses: it retires one zmm instruction per 2 cycles (measured:
// 1.9 G/s on 12 independent chains, against 7.7 G/s zmm FMAs), so 32 useful products (two
// instructions with two terms, three with three) take 4-6 cycles where two FMAs take 1; the
// zmm broadcast kernel on weights widened into L1 (gemm_avx512.cpp) runs near the FMA rate.
// On a Zen 4 (AVX512_BF16, no AMX) this kernel streams at half the widening one's rate even at
// m = 1 (gemm.cpp's Zen 4 table), so there it is not used.
//
// Each output is summed over k in one order (lanes over k, hi apart from mid + lo, one horizontal
// sum at the end) whatever m is, so a row's result does not depend on the batch it is in.
// As in gemm_avx2.cpp, every standard header comes BEFORE the target pragma.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX512)
#include "backend/cpu/gemm/avx512_intrinsics.h"  // <immintrin.h>, without GCC 12's false warnings

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")
#include "backend/cpu/gemm/kernel_staging.h"  // after the pragma: compiled for this ISA

namespace tpbatch::cpu::detail {
namespace {

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// x[0..k) split into kSplitTerms bf16 rows of kpad (k rounded up to 32) at terms + t * kpad, zero
// past k: hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi - mid). Each difference is exact in
// fp32, so |x - hi - mid - lo| <= 2^-24 |x|: fp32's own rounding. Where x is not finite the later
// terms are 0 (an infinite x keeps its infinity in hi instead of a NaN from inf - inf).
inline __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

void split_bf16_impl(const float* x, int64_t k, int64_t kpad, uint16_t* terms) {
  for (int64_t kk = 0; kk < kpad; kk += 32) {
    const int64_t left = k - kk;
    const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : left > 0 ? __mmask16((1u << left) - 1) : 0;
    const __mmask16 m1 = left >= 32 ? __mmask16(0xffff) : left > 16 ? __mmask16((1u << (left - 16)) - 1) : 0;
    __m512 r0 = _mm512_maskz_loadu_ps(m0, x + kk), r1 = _mm512_maskz_loadu_ps(m1, x + kk + 16);
    for (int t = 0; t < kSplitTerms; ++t) {
      const __m512i tb = (__m512i)_mm512_cvtne2ps_pbh(r1, r0);  // elements 0..15 from r0, 16..31 from r1
      _mm512_store_si512(terms + t * kpad + kk, tb);
      // What this term left over (a bf16 is the top half of an fp32), NaN (from inf - inf) as 0.
      r0 = _mm512_sub_ps(r0, widen(_mm512_castsi512_si256(tb)));
      r1 = _mm512_sub_ps(r1, widen(_mm512_extracti64x4_epi64(tb, 1)));
      r0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r0, r0, _CMP_ORD_Q), r0);
      r1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r1, r1, _CMP_ORD_Q), r1);
    }
  }
}

inline int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// ---- Row-blocked: R weight rows x MB rows of x, lanes over k ----

// y[i][r] = Σ_k w_r[k] x_i[k] for R weight rows (w, row stride ldw elements) and MB rows of x
// (xs: row i's terms at xs + i * kSplitTerms * kpad, hi, mid, lo kpad apart). Weight loads past k are masked (the
// row may end anywhere); x is zero-padded to kpad. pf: the next block of weight rows.
template <int R, int MB>
inline void rows_block(const uint16_t* w, int64_t ldw, const uint16_t* xs, int64_t kpad, float* y, int64_t ldy,
                       int64_t k, const uint16_t* pf) {
  __m512 acc_hi[R][MB], acc_lo[R][MB];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) acc_hi[r][i] = acc_lo[r][i] = _mm512_setzero_ps();
  auto step = [&](int64_t kk, __mmask32 mask) __attribute__((always_inline)) {
    if (pf) {
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(pf + r * ldw + kk), _MM_HINT_T0);
    }
    __m512i wv[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) wv[r] = _mm512_maskz_loadu_epi16(mask, w + r * ldw + kk);
    #pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) {
      static_assert(kSplitTerms == 3);
      const uint16_t* xi = xs + i * kSplitTerms * kpad + kk;
      const __m512i xh = _mm512_load_si512(xi), xm = _mm512_load_si512(xi + kpad);
      const __m512i xl = _mm512_load_si512(xi + 2 * kpad);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc_hi[r][i] = _mm512_dpbf16_ps(acc_hi[r][i], as_bh(wv[r]), as_bh(xh));
        acc_lo[r][i] = _mm512_dpbf16_ps(acc_lo[r][i], as_bh(wv[r]), as_bh(xm));
        acc_lo[r][i] = _mm512_dpbf16_ps(acc_lo[r][i], as_bh(wv[r]), as_bh(xl));
      }
    }
  };
  const int64_t k32 = k / 32 * 32;
  for (int64_t kk = 0; kk < k32; kk += 32) step(kk, ~__mmask32(0));
  if (k32 < k) step(k32, __mmask32((uint64_t(1) << (k - k32)) - 1));
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int i = 0; i < MB; ++i) y[i * ldy + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc_hi[r][i], acc_lo[r][i]));
}

template <int R>
inline void rows_of_x(int mb, const uint16_t* w, int64_t ldw, const uint16_t* xs, int64_t kpad, float* y,
                      int64_t ldy, int64_t k, const uint16_t* pf) {
  switch (mb) {
    case 3: rows_block<R, 3>(w, ldw, xs, kpad, y, ldy, k, pf); break;
    case 2: rows_block<R, 2>(w, ldw, xs, kpad, y, ldy, k, pf); break;
    default: rows_block<R, 1>(w, ldw, xs, kpad, y, ldy, k, pf); break;
  }
}

}  // namespace

void split_bf16(const float* x, int64_t k, int64_t kpad, uint16_t* terms) { split_bf16_impl(x, k, kpad, terms); }

void rows_bf16dp(const GemmArgs& a, int64_t n0, int64_t n1) {
  const int64_t k = a.k, kpad = round_up(k, 32);
  thread_local AlignedScratch<uint32_t> xs_mem;
  // m rows x kSplitTerms x kpad bf16 (two to a word)
  auto* xs = reinterpret_cast<uint16_t*>(xs_mem.get(size_t(a.m * kSplitTerms * kpad / 2)));
  for (int64_t i = 0; i < a.m; ++i) split_bf16_impl(a.x + i * a.ldx, k, kpad, xs + i * kSplitTerms * kpad);
  const auto* w = static_cast<const uint16_t*>(a.w);
  constexpr int R = 4;
  int64_t j = n0;
  for (; j + R <= n1; j += R) {
    // The next block's rows are prefetched during the first pass over this one.
    const uint16_t* pf = j + 2 * R <= n1 ? w + (j + R) * a.ldw : nullptr;
    for (int64_t i = 0; i < a.m;) {
      const int64_t rem = a.m - i;
      const int mb = rem >= 3 && rem != 4 ? 3 : rem >= 2 ? 2 : 1;
      rows_of_x<R>(mb, w + j * a.ldw, a.ldw, xs + i * kSplitTerms * kpad, kpad, a.y + i * a.ldy + j, a.ldy, k,
                   i == 0 ? pf : nullptr);
      i += mb;
    }
  }
  for (; j < n1; ++j)
    for (int64_t i = 0; i < a.m; ++i)
      rows_block<1, 1>(w + j * a.ldw, a.ldw, xs + i * kSplitTerms * kpad, kpad, a.y + i * a.ldy + j, a.ldy, k, nullptr);
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
