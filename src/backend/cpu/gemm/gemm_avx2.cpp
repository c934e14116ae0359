// The AVX2 + FMA + F16C kernels of gemm_nt. The project compiles for x86-64-v2, so this file
// switches the target on with a pragma for its own functions only; gemm.cpp calls them after
// checking the CPU. Every standard header is included BEFORE the pragma: an inline function
// instantiated under it could otherwise be emitted with AVX2 code and picked by the linker for
// the whole program.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX2)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#include "backend/cpu/gemm/avx2_sums.h"       // after the pragma: compiled for this ISA
#include "backend/cpu/gemm/kernel_staging.h"  // after the pragma: compiled for this ISA

namespace tpbatch::cpu::detail {
namespace {

// Eight weights widened to fp32. bf16 is the top half of an fp32: zero-extend and shift by 16.
template <DType WT>
struct Weights;
template <>
struct Weights<DType::F32> {
  static constexpr int kBytes = 4;
  static __m256 load8(const unsigned char* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
};
template <>
struct Weights<DType::BF16> {
  static constexpr int kBytes = 2;
  static __m256 load8(const unsigned char* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};
template <>
struct Weights<DType::F16> {
  static constexpr int kBytes = 2;
  static __m256 load8(const unsigned char* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

// acc[r][i] += w_r[kk..kk+8) · x_i[kk..kk+8) for R weight rows and MB rows of x. The loops over
// r and i must unroll (the project builds with -O2, which would not) so acc stays in registers.
// The next block of weight rows (pf) is prefetched while this one computes: rows of 768 bf16 are
// only 24 cache lines, too short for the hardware stream prefetcher to reach full speed on its own
// (measured: bf16 decode at half the fp32 bandwidth without it).
//   Prefetch::InOrder: the block's rows are whole and contiguous (one pass over k): its bytes in
//     address order, as many a step as this block consumes. On a Zen 4 (tpbatch_gemm_bench
//     --rows 1,2 --types F32 --path row-blocked --clock cpu) an fp32 step went 33-35 -> 25-28 ms.
//   Prefetch::PerRow: a k slice of each row (slices of kKc): the same columns of each next row.
enum class Prefetch { None, PerRow, InOrder };
template <DType WT, int R, int MB, Prefetch PF>
inline void fma_step(__m256 (&acc)[R][MB], const float* x, int64_t ldx, const unsigned char* w, int64_t ldwb,
                     int64_t kk, const unsigned char* pf) {
  constexpr int kB = Weights<WT>::kBytes;
  if constexpr (PF == Prefetch::InOrder && (R * 8 * kB) % 64 == 0) {
    #pragma GCC unroll 4
    for (int b = 0; b < R * 8 * kB; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(pf + kk / 8 * (R * 8 * kB) + b), _MM_HINT_T0);
  } else if constexpr (PF != Prefetch::None) {
    // One prefetch per row per 64-byte line: every iteration for fp32 rows would be twice that.
    if (kk % (64 / kB) == 0) {
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(pf + r * ldwb + kk * kB), _MM_HINT_T0);
    }
  }
  __m256 xv[MB];
  #pragma GCC unroll 16
  for (int i = 0; i < MB; ++i) xv[i] = _mm256_loadu_ps(x + i * ldx + kk);
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m256 wv = Weights<WT>::load8(w + r * ldwb + kk * kB);
    #pragma GCC unroll 16
    for (int i = 0; i < MB; ++i) acc[r][i] = _mm256_fmadd_ps(wv, xv[i], acc[r][i]);
  }
}

// y[i][r] = x_i · w_r (or += when `accumulate`: a later slice of k) for R weight rows (w, row
// stride ldwb bytes) and MB rows of x: one pass over k with R*MB vector accumulators; the k % 8
// tail goes through zero-padded copies.
template <DType WT, int R, int MB, Prefetch PF = Prefetch::None>
inline void block(const float* x, int64_t ldx, const unsigned char* w, int64_t ldwb, float* y, int64_t ldy,
                  int64_t k, bool accumulate, const unsigned char* pf = nullptr) {
  __m256 acc[R][MB];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int i = 0; i < MB; ++i) acc[r][i] = _mm256_setzero_ps();
  const int64_t k8 = k & ~int64_t(7);
  for (int64_t kk = 0; kk < k8; kk += 8) fma_step<WT, R, MB, PF>(acc, x, ldx, w, ldwb, kk, pf);
  if (k8 < k) {
    constexpr int kB = Weights<WT>::kBytes;
    const int64_t tail = k - k8;
    alignas(32) float xt[MB][8] = {};
    alignas(32) unsigned char wt[R][8 * kB] = {};
    #pragma GCC unroll 16
    for (int i = 0; i < MB; ++i) std::memcpy(xt[i], x + i * ldx + k8, size_t(tail) * 4);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) std::memcpy(wt[r], w + r * ldwb + k8 * kB, size_t(tail) * kB);
    fma_step<WT, R, MB, Prefetch::None>(acc, &xt[0][0], 8, &wt[0][0], 8 * kB, 0, nullptr);
  }
  if constexpr (R % 4 == 0) {
    #pragma GCC unroll 16
    for (int i = 0; i < MB; ++i)
      #pragma GCC unroll 16
      for (int r = 0; r < R; r += 4) {
        __m128 s = sum4(acc[r][i], acc[r + 1][i], acc[r + 2][i], acc[r + 3][i]);
        if (accumulate) s = _mm_add_ps(s, _mm_loadu_ps(y + i * ldy + r));
        _mm_storeu_ps(y + i * ldy + r, s);
      }
  } else {
    #pragma GCC unroll 16
    for (int i = 0; i < MB; ++i)
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) y[i * ldy + r] = sum1(acc[r][i]) + (accumulate ? y[i * ldy + r] : 0.0f);
  }
}

// One row of x (decode at batch 1) against R weight rows, each row's k split over U
// accumulators, software prefetch kGemvPrefetch bytes ahead. Used with R = 1 for 16-bit
// weights: they are then read as ONE sequential stream (over the whole matrix when rows are
// contiguous), which the prefetchers follow best. Measured on Zen 3 (tpbatch_gemm_bench, m = 1):
// R = 8 streams gave bf16 ~9 GB/s, R = 1 gives ~10-13 GB/s, about what fp32 reaches.
constexpr int64_t kGemvPrefetch = 1024;
template <DType WT, int R, int U>
inline void gemv_block(const float* x, const unsigned char* w, int64_t ldwb, float* y, int64_t k) {
  constexpr int kB = Weights<WT>::kBytes;
  __m256 acc[R][U];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 16
    for (int u = 0; u < U; ++u) acc[r][u] = _mm256_setzero_ps();
  const int64_t step = 8 * U, kU = k / step * step;
  for (int64_t kk = 0; kk < kU; kk += step) {
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      #pragma GCC unroll 16
      for (int64_t b = 0; b < step * kB; b += 64)
        _mm_prefetch(reinterpret_cast<const char*>(w + r * ldwb + kk * kB + b + kGemvPrefetch), _MM_HINT_T0);
    #pragma GCC unroll 16
    for (int u = 0; u < U; ++u) {
      const __m256 xv = _mm256_loadu_ps(x + kk + 8 * u);
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r)
        acc[r][u] = _mm256_fmadd_ps(Weights<WT>::load8(w + r * ldwb + (kk + 8 * u) * kB), xv, acc[r][u]);
    }
  }
  for (int64_t kk = kU; kk < k; kk += 8) {  // the last < 8U columns, the final < 8 zero-padded
    const int64_t len = std::min<int64_t>(8, k - kk);
    alignas(32) float xt[8] = {};
    std::memcpy(xt, x + kk, size_t(len) * 4);
    const __m256 xv = _mm256_load_ps(xt);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      alignas(32) unsigned char wt[8 * kB] = {};
      std::memcpy(wt, w + r * ldwb + kk * kB, size_t(len) * kB);
      acc[r][0] = _mm256_fmadd_ps(Weights<WT>::load8(wt), xv, acc[r][0]);
    }
  }
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 16
    for (int u = 1; u < U; ++u) acc[r][0] = _mm256_add_ps(acc[r][0], acc[r][u]);
    y[r] = sum1(acc[r][0]);
  }
}

template <DType WT, int R, Prefetch PF>
inline void rows_of_x(int mb, const float* x, int64_t ldx, const unsigned char* w, int64_t ldwb, float* y,
                      int64_t ldy, int64_t len, bool acc, const unsigned char* pf) {
  switch (mb) {
    case 3: block<WT, R, 3, PF>(x, ldx, w, ldwb, y, ldy, len, acc, pf); break;
    case 2: block<WT, R, 2, PF>(x, ldx, w, ldwb, y, ldy, len, acc, pf); break;
    default: block<WT, R, 1, PF>(x, ldx, w, ldwb, y, ldy, len, acc, pf); break;
  }
}

// All m rows of x against R weight rows, over the k slice [k0, k0 + len), in blocks of 3 rows
// of x: R = 4 by 3 rows keeps 12 accumulators + 3 x vectors + 1 weight vector in the 16 ymm
// registers. A remainder of 4 rows goes as 2 + 2 rather than 3 + 1 (a 1-row block does 4 FMAs
// per 5 loads). The first pass over the block prefetches the next block's slice (pf).
template <DType WT, int R>
inline void row_block(const GemmArgs& a, const unsigned char* w, int64_t ldwb, int64_t j, int64_t k0, int64_t len,
                      const unsigned char* pf) {
  const float* x = a.x + k0;
  float* y = a.y + j;
  const bool acc = k0 > 0;
  for (int64_t i = 0; i < a.m;) {
    const int64_t rem = a.m - i;
    const int mb = rem >= 3 && rem != 4 ? 3 : rem >= 2 ? 2 : 1;
    if (i > 0)
      rows_of_x<WT, R, Prefetch::None>(mb, x + i * a.ldx, a.ldx, w, ldwb, y + i * a.ldy, a.ldy, len, acc, nullptr);
    else if (len == a.k && ldwb == a.k * Weights<WT>::kBytes)
      rows_of_x<WT, R, Prefetch::InOrder>(mb, x, a.ldx, w, ldwb, y, a.ldy, len, acc, pf);
    else
      rows_of_x<WT, R, Prefetch::PerRow>(mb, x, a.ldx, w, ldwb, y, a.ldy, len, acc, pf);
    i += mb;
  }
}

// When the rows of x take more than one pass over a block of weight rows, k is cut into slices
// of kKc so the block's slice (4 rows x 512 x 4 bytes = 8 KiB for fp32) stays in L1 for every
// pass while the rows of x stream from L2; without it, k = 2048 (the down projection) makes the
// block plus three rows of x overflow L1 and the kernel runs at the L2 rate.
//
// Tried against this kernel and rejected (tpbatch_gemm_bench, 1 thread, Zen 3 under load 4-10,
// min of 3 interleaved runs, m = 1..32 on the up/down shapes): k slices of 128 or 256 (slower at
// m = 4..16, +10-30%); the next block's prefetch spread evenly over all passes instead of the
// first (Bresenham pacing), one to four blocks ahead, with T0, T1 or NTA hints, or issued in the
// last pass(es) (all within noise or slower); slice-major tile order so the rows of x stay in L1
// (up to 2x slower at m = 1-4: per-tile overhead, strided weight stream); 16-bit weights at
// m > 3 widened once per block into an L1 buffer and run through the fp32 kernel (slower at every
// m, 2x at m = 4, even L2-resident: vpmovzxwd + shift in registers costs less than the store and
// reload). What bounds m = 16 is arithmetic: with weights resident in L2 (--nk 64x768 --hot 1)
// the 4 x 3 kernel runs at ~0.6 of the OpenBLAS sgemm peak, and at m = 16 the streamed time is
// only ~1.2x that. At the peak itself an fp32 m = 16 step is >= 1.76x a bandwidth-bound m = 1
// step on this machine (32 flops / 84 GFLOP/s vs 4 bytes / 18.5 GB/s per weight), a bf16 one
// >= 3.5x (same flops, half the bytes; no AVX512_BF16 here). That arithmetic rate is what the
// broadcast kernel below raises (no horizontal sums, 2 FMAs per broadcast weight); it replaces
// this kernel for fp32 weights from m = 6 (gemm.cpp).
constexpr int64_t kKc = 512;

template <DType WT>
void rows_typed(const GemmArgs& a, int64_t n0, int64_t n1) {
  constexpr int kB = Weights<WT>::kBytes;
  const int64_t ldwb = a.ldw * kB;
  const auto* w = static_cast<const unsigned char*>(a.w);
  int64_t j = n0;
  // The block after [j, j + rows) for prefetching; the last one prefetches itself (harmless).
  auto next = [&](int64_t jj, int64_t rows) { return w + (jj + 2 * rows <= n1 ? jj + rows : jj) * ldwb; };
  // One row of x with 16-bit weights: the single-stream kernel. fp32 rows (twice the bytes) do
  // better through the 4-row blocks below with next-block prefetch (measured ~11-15 GB/s vs
  // ~9-11 for the single stream, on par with OpenBLAS sgemv).
  if (a.m == 1 && WT != DType::F32) {
    for (; j < n1; ++j) gemv_block<WT, 1, 8>(a.x, w + j * ldwb, ldwb, a.y + j, a.k);
    return;
  }
  const int64_t kc = a.m > 3 ? kKc : a.k;
  for (; j + 4 <= n1; j += 4)
    for (int64_t k0 = 0; k0 < a.k; k0 += kc)
      row_block<WT, 4>(a, w + j * ldwb + k0 * kB, ldwb, j, k0, std::min(kc, a.k - k0), next(j, 4) + k0 * kB);
  for (; j < n1; ++j)
    for (int64_t k0 = 0; k0 < a.k; k0 += kc)
      row_block<WT, 1>(a, w + j * ldwb + k0 * kB, ldwb, j, k0, std::min(kc, a.k - k0), w + j * ldwb + k0 * kB);
}

template <DType WT>
void widen_typed(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  constexpr int kB = Weights<WT>::kBytes;
  const int64_t k = a.k, k8 = k & ~int64_t(7);
  for (int64_t r = 0; r < rows; ++r) {
    const auto* src = static_cast<const unsigned char*>(a.w) + (r0 + r) * a.ldw * kB;
    float* dst = out + r * k;
    int64_t kk = 0;
    for (; kk < k8; kk += 8) _mm256_storeu_ps(dst + kk, Weights<WT>::load8(src + kk * kB));
    if (kk < k) {
      alignas(32) unsigned char t[8 * kB] = {};
      alignas(32) float f[8];
      std::memcpy(t, src + kk * kB, size_t(k - kk) * kB);
      _mm256_store_ps(f, Weights<WT>::load8(t));
      std::memcpy(dst + kk, f, size_t(k - kk) * 4);
    }
  }
}

// ---- Broadcast-weight kernel: y^T = W · x^T, for decode batches of about 8..64 rows ----
// x^T is packed once per call into xt[k][16] per block of 16 rows of x (zero-padded), so a step
// of k is two aligned vector loads; each weight is broadcast straight from its row
// (vbroadcastss from memory: one load uop) and multiplies 16 rows of x with 2 FMAs. R = 6 weight
// rows x 16 rows of x = 12 accumulators, no horizontal sums: each lane is one output's running
// sum over k in order, so a result does not depend on m, the block it falls in or the k slice.
// A last block of <= 8 rows (all of m <= 8) takes one ymm per step (R = 6 x 8: 6 FMAs per 7
// loads; a 12 x 8 tile measured slower still, its 12 weight streams). The tile is transposed into
// y once per call.
constexpr int kBcastRows = 16;  // rows of x per block (2 ymm per step of k)
constexpr int kBcastWeightRows = 6;  // R: 6 x 2 accumulators + 2 x vectors + 1 broadcast
constexpr int kBcastUnroll = 8;  // steps of k per unrolled group (divides 16: the prefetch period)

// acc_io[r][0..8V) += Σ_kk w_r[kk] · xt[kk][0..8V) over kk < len; w_r = wr + r * ldw (fp32).
// With `load` false the sums start from zero. pf: the next block's rows (same ldw), prefetched
// one cache line per 16 steps; nullptr for none.
template <int R, int V>
inline void bcast_tile(const float* wr, int64_t ldw, const float* xt, int64_t len, float* acc_io, bool load,
                       const float* pf) {
  __m256 acc[R][V];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = load ? _mm256_load_ps(acc_io + (r * V + v) * 8) : _mm256_setzero_ps();
  // One step of k: V vector loads of xt, R broadcasts, R * V FMAs.
  auto step = [&](int64_t kk) __attribute__((always_inline)) {
    __m256 xv[V];
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) xv[v] = _mm256_load_ps(xt + kk * 8 * V + 8 * v);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256 b = _mm256_broadcast_ss(wr + r * ldw + kk);
      #pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(b, xv[v], acc[r][v]);
    }
  };
  // Steps in unrolled groups of kBcastUnroll: without it GCC keeps one pointer per weight row and
  // bumps each every step (R integer adds per R FMAs, some spilled), ~1/3 below the FMA rate.
  constexpr int kU = kBcastUnroll;
  const int64_t lenU = len / kU * kU;
  for (int64_t k0 = 0; k0 < lenU; k0 += kU) {
    if (pf && k0 % 16 == 0) {  // one 64-byte line of each next row per 16 steps
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(pf + r * ldw + k0), _MM_HINT_T0);
    }
    #pragma GCC unroll 16
    for (int u = 0; u < kU; ++u) step(k0 + u);
  }
  for (int64_t kk = lenU; kk < len; ++kk) step(kk);
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm256_store_ps(acc_io + (r * V + v) * 8, acc[r][v]);
}

// bcast_tile for a runtime number of weight rows 1..RMax (the last block of n).
template <int V, int RMax, int R = RMax>
inline void bcast_tile_rows(int rows, const float* wr, int64_t ldw, const float* xt, int64_t len, float* acc_io,
                            bool load, const float* pf) {
  if constexpr (R >= 1) {
    if (rows == R) return bcast_tile<R, V>(wr, ldw, xt, len, acc_io, load, pf);
    bcast_tile_rows<V, RMax, R - 1>(rows, wr, ldw, xt, len, acc_io, load, pf);
  }
}

// k slice: the R weight rows' slice (6 x 256 x 4 B = 6 KiB) stays in L1 for every block of 16
// rows of x; 16-bit rows are widened into an L1 buffer of that size first.
//
// Tried for this kernel (tpbatch_gemm_bench --threads 1 --clock cpu, streamed weights, min of 3
// interleaved runs, load 1-5): the step loop not unrolled (GCC then keeps one pointer per
// weight row and bumps each every step, some spilled: 0.52 of the sgemm peak with L2-resident
// weights at m = 16, 0.69 unrolled by 8); prefetch of the same rows 64, 128 or 256 floats ahead,
// or none, instead of the next block's rows (lm_head m = 16: 13.0-19.8 ms vs 10.8 ms); a 12 x 8
// tile for m <= 8 (12 accumulators, 1 x vector; 12 weight streams: down m = 8 1653 us vs 637 us
// for the 6 x 8 tile); k slices of 256 or 1024 also for one block of x, so its x^T slice stays
// in L1 (down m = 16: 949-988 us vs 922 us unsliced, up 783-850 vs 701). 16-bit weights: the widened slice (kc 256 or 512, with and without
// prefetch of the next block's slice), and for bf16 a pair broadcast straight from the rows (a
// dword broadcast holds w[k] and w[k+1]: shift left 16 and mask the low half give both as fp32;
// 1 shift + 1 and per 4 FMAs). The pair was the faster at one block of x (m <= 16), the widened
// slice from 2 blocks (it is widened once for all of them); neither beat the row-blocked kernel
// except at m = 16 (3-17%), slower at m = 12 and 20, so 16-bit stays row-blocked in Auto and the
// pair is not kept; the widened slice serves GemmPath::Broadcast forced on 16-bit weights.
constexpr int64_t kBcastKc = 256;

template <DType WT>
void broadcast_typed(const GemmArgs& a, int64_t n0, int64_t n1) {
  constexpr int kB = Weights<WT>::kBytes;
  const int64_t m = a.m, k = a.k;
  constexpr int width = kBcastRows, V = 2, R = kBcastWeightRows;
  const int64_t blocks = (m + width - 1) / width;
  // The last block may be narrow (<= 8 rows left): one ymm per step, half the FMAs.
  const int last_rows = int(m - (blocks - 1) * width);
  const int last_v = last_rows <= 8 ? 1 : V;
  thread_local AlignedScratch<float> xt_mem, acc_mem, wide_mem;
  float* const xt_all = xt_mem.get(size_t(blocks * width * k));
  float* const acc_all = acc_mem.get(size_t(blocks * R * width));
  for (int64_t b = 0; b < blocks; ++b) {
    const int bw = b + 1 < blocks ? width : last_v * 8;
    pack_xt(a, b * width, int(std::min<int64_t>(width, m - b * width)), bw, xt_all + b * width * k);
  }
  // fp32 rows of a single block of x stream whole; 16-bit ones go through the widened slice.
  // Quantized ones (fp8, 4-bit: WT is F32) are dequantized R whole rows at a time and then run
  // exactly as fp32 rows (the same slices of k), so the result is the dequantized weights'.
  const bool quantized = a.wtype == DType::F8E4M3 || a.wtype == DType::I4;
  const int64_t kc = WT == DType::F32 && blocks == 1 ? k : kBcastKc;
  float* const wide = WT == DType::F32 && !quantized ? nullptr : wide_mem.get(size_t(R * (quantized ? k : kc)));
  const auto* wbytes = static_cast<const unsigned char*>(a.w);
  for (int64_t j = n0; j < n1; j += R) {
    const int rows = int(std::min<int64_t>(R, n1 - j));
    if (quantized) widen_avx2(a, j, rows, wide);
    for (int64_t k0 = 0; k0 < k; k0 += kc) {
      const int64_t len = std::min(kc, k - k0);
      const float* wr;
      int64_t ldw;
      const float* pf = nullptr;
      if (quantized) {
        wr = wide + k0;
        ldw = k;
      } else if constexpr (WT == DType::F32) {
        wr = reinterpret_cast<const float*>(wbytes) + j * a.ldw + k0;
        ldw = a.ldw;
        if (j + R + rows <= n1) pf = wr + R * a.ldw;
      } else {
        const int64_t len8 = len & ~int64_t(7);
        for (int r = 0; r < rows; ++r) {
          const unsigned char* src = wbytes + ((j + r) * a.ldw + k0) * kB;
          float* dst = wide + r * kc;
          int64_t kk = 0;
          // The same slice of the next block's rows, one line per 64 bytes (as the fp32 tile).
          const unsigned char* next = src + R * a.ldw * kB;
          const bool pf_next = j + R + rows <= n1;
          for (; kk < len8; kk += 8) {
            if (pf_next && kk % (64 / kB) == 0)
              _mm_prefetch(reinterpret_cast<const char*>(next + kk * kB), _MM_HINT_T0);
            _mm256_store_ps(dst + kk, Weights<WT>::load8(src + kk * kB));
          }
          for (; kk < len; ++kk) {
            alignas(32) unsigned char t[8 * kB] = {};
            alignas(32) float f[8];
            std::memcpy(t, src + kk * kB, kB);
            _mm256_store_ps(f, Weights<WT>::load8(t));
            dst[kk] = f[0];
          }
        }
        wr = wide;
        ldw = kc;
      }
      for (int64_t b = 0; b < blocks; ++b) {
        const int v = b + 1 < blocks ? V : last_v;
        const float* xt = xt_all + b * width * k + k0 * 8 * v;
        float* acc = acc_all + b * R * width;
        const float* bpf = b == 0 ? pf : nullptr;
        if (v == 2)
          bcast_tile_rows<2, R>(rows, wr, ldw, xt, len, acc, k0 > 0, bpf);
        else
          bcast_tile_rows<1, R>(rows, wr, ldw, xt, len, acc, k0 > 0, bpf);
      }
    }
    // The tiles of y^T (acc[r][lane] per block, lanes 8 * v wide) into y.
    for (int64_t b = 0; b < blocks; ++b)
      store_yt(acc_all + b * R * width, b + 1 < blocks ? width : last_v * 8, a.y + b * width * a.ldy + j, a.ldy,
               std::min<int64_t>(width, m - b * width), rows);
  }
}

}  // namespace

void broadcast_avx2(const GemmArgs& a, int64_t n0, int64_t n1) {
  switch (a.wtype) {
    case DType::F32:
    case DType::F8E4M3:
    case DType::I4: broadcast_typed<DType::F32>(a, n0, n1); break;
    case DType::BF16: broadcast_typed<DType::BF16>(a, n0, n1); break;
    case DType::F16: broadcast_typed<DType::F16>(a, n0, n1); break;
    default: break;  // rejected by gemm_nt
  }
}

void rows_avx2(const GemmArgs& a, int64_t n0, int64_t n1) {
  switch (a.wtype) {
    case DType::F32: rows_typed<DType::F32>(a, n0, n1); break;
    case DType::BF16: rows_typed<DType::BF16>(a, n0, n1); break;
    case DType::F16: rows_typed<DType::F16>(a, n0, n1); break;
    default: break;  // rejected by gemm_nt
  }
}

void widen_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  switch (a.wtype) {
    case DType::F32: widen_typed<DType::F32>(a, r0, rows, out); break;
    case DType::BF16: widen_typed<DType::BF16>(a, r0, rows, out); break;
    case DType::F16: widen_typed<DType::F16>(a, r0, rows, out); break;
    case DType::F8E4M3: dequant_fp8_avx2(a, r0, rows, out); break;
    case DType::I4: dequant_int4_avx2(a, r0, rows, out); break;
    default: break;
  }
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX2
