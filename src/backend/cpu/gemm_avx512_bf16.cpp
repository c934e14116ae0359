// bf16 weights computed natively on AVX512_BF16 CPUs, for decode steps of a few rows: vdpbf16ps
// multiplies pairs of bf16 and accumulates in fp32, 32 products per instruction, with no widening
// of the weights.
//
// vdpbf16ps takes both operands in bf16, so the fp32 activations are split into two bf16 terms,
// x = hi + lo (hi = bf16(x), lo = bf16(x - hi)), and each weight meets both: the activations keep
// 16 significant bits (|x - hi - lo| <= 2^-16 |x|) instead of bf16's 8; products and sums are
// fp32. vdpbf16ps reads subnormal bf16 as zero: weights below 2^-126 in magnitude count as 0.
//
// Why only a few rows (gemm.cpp's Auto, m <= 5): one row of x is bound by the weight stream, and
// here this kernel streams bf16 weights at the read bandwidth (measured on a Sapphire-Rapids-class
// Xeon, tpbatch_gemm_bench --threads 1 --path row-blocked, m = 1: 14-16 GB/s against 11 GB/s for
// the AVX2 widening kernel, 1.0x the machine's streaming read). From a few rows on the step is
// compute-bound, and there vdpbf16ps loses: it retires one zmm instruction per 2 cycles (measured:
// 1.9 G/s on 12 independent chains, against 7.7 G/s zmm FMAs), so 32 useful products (two
// instructions, with the split) take 4 cycles where two FMAs take 1 (2 without the split); the
// zmm broadcast kernel on weights widened into L1 (gemm_avx512.cpp) runs near the FMA rate.
//
// Each output is summed over k in one order (lanes over k, one horizontal sum at the end)
// whatever m is, so a row's result does not depend on the batch it is in.
// As in gemm_avx2.cpp, every standard header comes BEFORE the target pragma.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX512)
// GCC 12 flags its own AVX-512 intrinsics' _mm512_undefined_*() (self-initialised on purpose) as
// uninitialised once they are inlined here; the warnings point into its headers, so they are off
// from their inclusion on.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c")

namespace tpbatch::cpu::detail {
namespace {

// A growable 64-byte-aligned buffer of 32-bit words with internal linkage (not std::vector: its
// member templates instantiated under the pragma could be emitted with AVX-512 code and picked by
// the linker for the whole program).
struct AlignedWords {
  uint32_t* p = nullptr;
  size_t cap = 0;
  AlignedWords() = default;
  AlignedWords(const AlignedWords&) = delete;
  AlignedWords& operator=(const AlignedWords&) = delete;
  ~AlignedWords() { std::free(p); }
  uint32_t* get(size_t n) {
    if (n > cap) {
      std::free(p);
      cap = (n + 15) / 16 * 16;
      p = static_cast<uint32_t*>(std::aligned_alloc(64, cap * 4));
      if (!p) throw std::bad_alloc();
    }
    return p;
  }
};

inline __m512bh as_bh(__m512i v) { return (__m512bh)v; }

// x[0..k) split into hi[0..kpad) and lo[0..kpad) bf16 (kpad: k rounded up to 32), zero past k.
// lo is 0 where x is not finite (an infinite x keeps its infinity in hi instead of a NaN from
// inf - inf).
void split_bf16_impl(const float* x, int64_t k, int64_t kpad, uint16_t* hi, uint16_t* lo) {
  for (int64_t kk = 0; kk < kpad; kk += 32) {
    const int64_t left = k - kk;
    const __mmask16 m0 = left >= 16 ? __mmask16(0xffff) : left > 0 ? __mmask16((1u << left) - 1) : 0;
    const __mmask16 m1 = left >= 32 ? __mmask16(0xffff) : left > 16 ? __mmask16((1u << (left - 16)) - 1) : 0;
    const __m512 x0 = _mm512_maskz_loadu_ps(m0, x + kk), x1 = _mm512_maskz_loadu_ps(m1, x + kk + 16);
    const __m512bh h = _mm512_cvtne2ps_pbh(x1, x0);  // elements 0..15 from x0, 16..31 from x1
    const __m512i hb = (__m512i)h;
    // hi widened back to fp32: bf16 is the top half of an fp32.
    const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hb)), 16));
    const __m512 h1 =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hb, 1)), 16));
    __m512 r0 = _mm512_sub_ps(x0, h0), r1 = _mm512_sub_ps(x1, h1);
    r0 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r0, r0, _CMP_ORD_Q), r0);
    r1 = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r1, r1, _CMP_ORD_Q), r1);
    _mm512_store_si512(hi + kk, hb);
    _mm512_store_si512(lo + kk, (__m512i)_mm512_cvtne2ps_pbh(r1, r0));
  }
}

inline int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// ---- Row-blocked: R weight rows x MB rows of x, lanes over k ----

// y[i][r] = Σ_k w_r[k] x_i[k] for R weight rows (w, row stride ldw elements) and MB rows of x
// (xs: row i's hi at xs + i * 2 * kpad, its lo kpad after). Weight loads past k are masked (the
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
      const __m512i xh = _mm512_load_si512(xs + i * 2 * kpad + kk);
      const __m512i xl = _mm512_load_si512(xs + i * 2 * kpad + kpad + kk);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc_hi[r][i] = _mm512_dpbf16_ps(acc_hi[r][i], as_bh(wv[r]), as_bh(xh));
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

void split_bf16(const float* x, int64_t k, int64_t kpad, uint16_t* hi, uint16_t* lo) {
  split_bf16_impl(x, k, kpad, hi, lo);
}

void rows_bf16dp(const GemmArgs& a, int64_t n0, int64_t n1) {
  const int64_t k = a.k, kpad = round_up(k, 32);
  thread_local AlignedWords xs_mem;
  auto* xs = reinterpret_cast<uint16_t*>(xs_mem.get(size_t(a.m * kpad)));  // m rows x (hi, lo) x kpad bf16
  for (int64_t i = 0; i < a.m; ++i) split_bf16_impl(a.x + i * a.ldx, k, kpad, xs + i * 2 * kpad, xs + i * 2 * kpad + kpad);
  const auto* w = static_cast<const uint16_t*>(a.w);
  constexpr int R = 4;
  int64_t j = n0;
  for (; j + R <= n1; j += R) {
    // The next block's rows are prefetched during the first pass over this one.
    const uint16_t* pf = j + 2 * R <= n1 ? w + (j + R) * a.ldw : nullptr;
    for (int64_t i = 0; i < a.m;) {
      const int64_t rem = a.m - i;
      const int mb = rem >= 3 && rem != 4 ? 3 : rem >= 2 ? 2 : 1;
      rows_of_x<R>(mb, w + j * a.ldw, a.ldw, xs + i * 2 * kpad, kpad, a.y + i * a.ldy + j, a.ldy, k,
                   i == 0 ? pf : nullptr);
      i += mb;
    }
  }
  for (; j < n1; ++j)
    for (int64_t i = 0; i < a.m; ++i)
      rows_block<1, 1>(w + j * a.ldw, a.ldw, xs + i * 2 * kpad, kpad, a.y + i * a.ldy + j, a.ldy, k, nullptr);
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
