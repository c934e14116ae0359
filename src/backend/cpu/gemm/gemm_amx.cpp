// bf16 weights on AMX tiles (Sapphire Rapids and later): TDPBF16PS multiplies a 16 x 32 bf16 tile
// by a 32 x 16 one into 16 x 16 fp32 sums, 16K products per instruction (measured here: 3.8 TFLOP/s
// on one core, 18x the fp32 sgemm peak of the same core).
//
// The tiles compute y^T = W · x^T: the weights are the left operand, loaded straight from their
// [n][k] rows (16 rows x 64 bytes per tile, no repacking); x is the right operand, which AMX wants
// in pairs of k ("VNNI": tile row p holds, for each of 16 rows of x, its elements 2p and 2p + 1),
// so x is split and transposed once per call (m x k, small beside the n x k weights). As in the
// vdpbf16ps kernel (gemm_avx512_bf16.cpp) x is split into three bf16 terms, hi + mid + lo (x to
// fp32's rounding), and each tile of weights meets all three: fp32 arithmetic on the widened
// weights up to summation order. Subnormal bf16 weights count as 0.
//
// Blocking: 32 weight rows x 32 rows of x per pass over k, in the 8 tile registers: 4 sums
// (2 x 2 blocks of 16 x 16), 2 weight tiles, 2 x tiles (hi and mid, then lo). Each output is summed over
// k in one order whatever m is. Rows of weights past n (the last block) and the last k step when
// k is not a multiple of 32 come from zero-padded copies, never from past the end of a row.
//
// The process must be granted the tile state once (arch_prctl ARCH_REQ_XCOMP_PERM, Linux >= 5.16);
// amx_bf16_usable() asks for it and says whether the kernel may run. Each call loads the tile
// configuration on its thread and releases the tiles at the end.
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AMX)
#include <cpuid.h>
#include "backend/cpu/gemm/avx512_intrinsics.h"  // <immintrin.h>, without GCC 12's false warnings

namespace tpbatch::cpu::detail {

bool amx_bf16_usable() {
  static const bool usable = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const bool amx_bf16 = (d >> 22) & 1, amx_tile = (d >> 24) & 1;
    if (!amx_bf16 || !amx_tile) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

}  // namespace tpbatch::cpu::detail

#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "backend/cpu/gemm/kernel_staging.h"  // after the pragma: compiled for this ISA

namespace tpbatch::cpu::detail {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tile registers: sums C[weight block][x block], weight tiles A0/A1, two x tiles. Macros of
// literal numbers: the intrinsics paste them into the instruction text.
#define kC00 0
#define kC10 1
#define kC01 2
#define kC11 3
#define kA0 4
#define kA1 5
#define kX0 6
#define kX1 7
constexpr int64_t kTileBytes = 1024;  // 16 rows x 64 bytes
constexpr int kPrefetchSteps = 4;     // weight lines fetched this many k steps ahead
static_assert(kSplitTerms == 3);
constexpr int64_t kStepWords = kSplitTerms * 256;  // per block of 16 rows of x and k step: 3 tiles

// The tile of weights for one block of 16 rows at k step s: straight from the rows when they are
// all there, else from a zero-padded copy (the last block of rows, or the tail step of k).
struct WeightBlock {
  const uint16_t* rows = nullptr;  // 16 rows, stride bytes apart
  int64_t stride = 0;
  const uint16_t* tail = nullptr;  // the last step's 16 x 32 copy when k % 32 != 0, else null
  int64_t steps = 0;
  const uint16_t* at(int64_t s) const { return tail && s == steps - 1 ? tail : rows + s * 32; }
  int64_t stride_at(int64_t s) const { return tail && s == steps - 1 ? 64 : stride; }
};

// Copies rows [r0, r0 + count) (count <= 16) of the weights, columns [c0, c0 + width) into
// dst[16][dst_cols], zero elsewhere.
void copy_padded(const GemmArgs& a, int64_t r0, int64_t count, int64_t c0, int64_t width, uint16_t* dst,
                 int64_t dst_cols) {
  std::memset(dst, 0, size_t(16 * dst_cols) * 2);
  const auto* w = static_cast<const uint16_t*>(a.w);
  for (int64_t r = 0; r < count; ++r) std::memcpy(dst + r * dst_cols, w + (r0 + r) * a.ldw + c0, size_t(width) * 2);
}

// C[b][i] tile sums for NB weight blocks x MB blocks of x, over every k step.
template <int NB, int MB>
inline void tile_pass(const WeightBlock (&wb)[2], const uint32_t* xt, int64_t steps, int64_t xblock_words,
                      bool prefetch) {
  _tile_zero(kC00);
  if constexpr (NB == 2) _tile_zero(kC10);
  if constexpr (MB == 2) _tile_zero(kC01);
  if constexpr (NB == 2 && MB == 2) _tile_zero(kC11);
  for (int64_t s = 0; s < steps; ++s) {
    if (prefetch && s + kPrefetchSteps < steps - 1) {
      for (int b = 0; b < NB; ++b)
        for (int r = 0; r < 16; ++r)
          _mm_prefetch(reinterpret_cast<const char*>(wb[b].rows) + r * wb[b].stride + (s + kPrefetchSteps) * 64,
                       _MM_HINT_T0);
    }
    _tile_loadd(kA0, wb[0].at(s), wb[0].stride_at(s));
    if constexpr (NB == 2) _tile_loadd(kA1, wb[1].at(s), wb[1].stride_at(s));
    // x block i, step s: its hi, mid and lo pair tiles (16 rows of 64 bytes each), into the two x
    // tiles in turn; every sum takes hi, mid, lo in that order.
    for (int i = 0; i < MB; ++i) {
      const uint32_t* xs = xt + s * kStepWords + i * xblock_words;
      _tile_loadd(kX0, xs, 64);
      _tile_loadd(kX1, xs + 256, 64);
      if (i == 0) {
        _tile_dpbf16ps(kC00, kA0, kX0);
        if constexpr (NB == 2) _tile_dpbf16ps(kC10, kA1, kX0);
        _tile_dpbf16ps(kC00, kA0, kX1);
        if constexpr (NB == 2) _tile_dpbf16ps(kC10, kA1, kX1);
      } else {
        _tile_dpbf16ps(kC01, kA0, kX0);
        if constexpr (NB == 2) _tile_dpbf16ps(kC11, kA1, kX0);
        _tile_dpbf16ps(kC01, kA0, kX1);
        if constexpr (NB == 2) _tile_dpbf16ps(kC11, kA1, kX1);
      }
      _tile_loadd(kX0, xs + 512, 64);
      if (i == 0) {
        _tile_dpbf16ps(kC00, kA0, kX0);
        if constexpr (NB == 2) _tile_dpbf16ps(kC10, kA1, kX0);
      } else {
        _tile_dpbf16ps(kC01, kA0, kX0);
        if constexpr (NB == 2) _tile_dpbf16ps(kC11, kA1, kX0);
      }
    }
  }
}

}  // namespace

// One function: the packing of x and the tile loop share the packed layout (steps, kpad, block words) and scratch.
void bf16_amx(const GemmArgs& a, int64_t n0, int64_t n1) {
  const int64_t m = a.m, k = a.k, steps = (k + 31) / 32, kpad = steps * 32;
  const int64_t xblocks = (m + 15) / 16;
  const int64_t xblock_words = steps * kStepWords;  // per block of 16 rows of x
  thread_local AlignedScratch<uint32_t> xt_mem, split_mem, edge_mem, sums_mem;
  uint32_t* const xt = xt_mem.get(size_t(xblocks * xblock_words));
  // 16 rows x kSplitTerms x kpad bf16, two to a word
  auto* const split = reinterpret_cast<uint16_t*>(split_mem.get(size_t(16 * kSplitTerms * kpad / 2)));
  // x: each block of 16 rows split into hi/mid/lo bf16 rows, then transposed into pair-major tiles:
  // tile row p of step s holds dword (s * 16 + p) of each of the 16 rows.
  for (int64_t xb = 0; xb < xblocks; ++xb) {
    const int64_t rows = std::min<int64_t>(16, m - xb * 16);
    for (int64_t i = 0; i < 16; ++i) {
      uint16_t* terms = split + i * kSplitTerms * kpad;
      if (i < rows)
        split_bf16(a.x + (xb * 16 + i) * a.ldx, k, kpad, terms);
      else
        std::memset(terms, 0, size_t(kSplitTerms * kpad) * 2);
    }
    // dword index of row i's start (a row's terms are kSplitTerms * kpad / 2 words)
    const __m512i idx = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                           _mm512_set1_epi32(int(kSplitTerms * kpad / 2)));
    for (int64_t s = 0; s < steps; ++s)
      for (int part = 0; part < kSplitTerms; ++part) {
        const auto* base = reinterpret_cast<const int*>(split + part * kpad) + s * 16;
        uint32_t* dst = xt + xb * xblock_words + s * kStepWords + part * 256;
        for (int p = 0; p < 16; ++p)
          _mm512_store_si512(dst + p * 16, _mm512_i32gather_epi32(idx, base + p, 4));
      }
  }
  const int64_t tail = k % 32;
  auto* const edge = reinterpret_cast<uint16_t*>(edge_mem.get(size_t(2 * 16 * (kpad + 32) / 2)));
  auto* const sums = reinterpret_cast<float*>(sums_mem.get(4 * 256));
  asm volatile("" ::: "memory");  // the tile loads (asm without memory operands) read what was stored above

  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  _tile_loadconfig(&cfg);
  const auto* w = static_cast<const uint16_t*>(a.w);
  for (int64_t j = n0; j < n1; j += 32) {
    WeightBlock wb[2];
    const int nb = n1 - j > 16 ? 2 : 1;
    for (int b = 0; b < nb; ++b) {
      const int64_t r0 = j + 16 * b, count = std::min<int64_t>(16, n1 - r0);
      uint16_t* own = edge + b * 16 * (kpad + 32);
      wb[b].steps = steps;
      if (count < 16) {  // the last block of rows: all of it from a zero-padded copy
        copy_padded(a, r0, count, 0, k, own, kpad);
        wb[b].rows = own;
        wb[b].stride = kpad * 2;
      } else {
        wb[b].rows = w + r0 * a.ldw;
        wb[b].stride = a.ldw * 2;
        if (tail) {
          copy_padded(a, r0, 16, k - tail, tail, own + 16 * kpad, 32);
          wb[b].tail = own + 16 * kpad;
        }
      }
    }
    asm volatile("" ::: "memory");
    for (int64_t xb = 0; xb < xblocks; xb += 2) {
      const int mb = xblocks - xb > 1 ? 2 : 1;
      const uint32_t* x0 = xt + xb * xblock_words;
      const bool prefetch = xb == 0 && wb[0].tail == nullptr && wb[0].stride == a.ldw * 2;
      if (nb == 2 && mb == 2) tile_pass<2, 2>(wb, x0, steps, xblock_words, prefetch);
      else if (nb == 2) tile_pass<2, 1>(wb, x0, steps, xblock_words, prefetch);
      else if (mb == 2) tile_pass<1, 2>(wb, x0, steps, xblock_words, prefetch);
      else tile_pass<1, 1>(wb, x0, steps, xblock_words, prefetch);
      for (int b = 0; b < nb; ++b)
        for (int i = 0; i < mb; ++i) {
          // Tile numbers are immediates: C00, C10, C01, C11 by (b, i).
          if (b == 0 && i == 0) _tile_stored(kC00, sums, 64);
          if (b == 1 && i == 0) _tile_stored(kC10, sums, 64);
          if (b == 0 && i == 1) _tile_stored(kC01, sums, 64);
          if (b == 1 && i == 1) _tile_stored(kC11, sums, 64);
          const int64_t row_x = (xb + i) * 16, row_w = j + 16 * b;
          store_yt(sums, 16, a.y + row_x * a.ldy + row_w, a.ldy, std::min<int64_t>(16, m - row_x),
                   std::min<int64_t>(16, n1 - row_w));
        }
    }
  }
  _tile_release();
}

}  // namespace tpbatch::cpu::detail

#undef kC00
#undef kC10
#undef kC01
#undef kC11
#undef kA0
#undef kA1
#undef kX0
#undef kX1
#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AMX
