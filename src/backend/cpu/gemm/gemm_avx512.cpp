// The AVX-512 broadcast-weight kernel of gemm_nt (decode batches and prefill): the AVX2 broadcast
// kernel (gemm_avx2.cpp) on zmm registers, 16 rows of x per vector; 16-bit weights are widened a
// k slice of 12 rows at a time into an L1 buffer (2 ALU ops per 16 weights, against 16-32 FMAs
// per 16 weights that use them). gemm.cpp calls it
// after checking the CPU (AVX512F/BW/VL/DQ). As in gemm_avx2.cpp, every standard header comes
// BEFORE the target pragma, so no inline function of theirs is emitted with AVX-512 code.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <new>

#include "backend/cpu/gemm/gemm_kernels.h"
#include "backend/dtype.h"

#if defined(TPBATCH_GEMM_HAVE_AVX512)
#include "backend/cpu/gemm/avx512_intrinsics.h"  // <immintrin.h>, without GCC 12's false warnings

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "backend/cpu/gemm/kernel_staging.h"  // after the pragma: compiled for this ISA

namespace tpbatch::cpu::detail {
namespace {

// x^T is packed once per call into xt[k][32] per block of 32 rows of x (zero-padded); the last
// block, when it holds <= 16 rows, is 16 wide (one zmm). Each weight is broadcast from its row
// (vbroadcastss from memory) against V zmm of x. R = 12 weight rows x V = 2 zmm = 24
// accumulators + 2 x vectors + 1 broadcast of the 32 registers. Each lane is one output's running
// sum over k in order: a result does not depend on m, the block or the k slice.
constexpr int kRowsPerBlock = 32;
constexpr int kWeightRows = 12;
constexpr int kUnroll = 8;  // steps of k per unrolled group (divides 16: the prefetch period)
// k slice when there are several blocks of x, or the weights are 16-bit: 12 rows x 128 x 4 B =
// 6 KiB of (widened) weights stay in L1 for every block. Measured for 16-bit weights at m = 4..64
// (tpbatch_gemm_bench --path broadcast, up/down, 1 thread): slices of 128 beat 256 by 3-10%,
// 512-4096 by 10-25%.
constexpr int64_t kKc = 128;

// acc_io[r][0..16V) += Σ_kk w_r[kk] · xt[kk][0..16V) over kk < len, w_r = wr + r * ldw. With
// `load` false the sums start from zero. pf: the next block of weight rows, one line per 16 steps.
template <int R, int V>
inline void tile(const float* wr, int64_t ldw, const float* xt, int64_t len, float* acc_io, bool load,
                 const float* pf) {
  __m512 acc[R][V];
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = load ? _mm512_load_ps(acc_io + (r * V + v) * 16) : _mm512_setzero_ps();
  auto step = [&](int64_t kk) __attribute__((always_inline)) {
    __m512 xv[V];
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) xv[v] = _mm512_load_ps(xt + kk * 16 * V + 16 * v);
    #pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 b = _mm512_set1_ps(wr[r * ldw + kk]);
      #pragma GCC unroll 4
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(b, xv[v], acc[r][v]);
    }
  };
  const int64_t lenU = len / kUnroll * kUnroll;
  for (int64_t k0 = 0; k0 < lenU; k0 += kUnroll) {
    if (pf && k0 % 16 == 0) {
      #pragma GCC unroll 16
      for (int r = 0; r < R; ++r) _mm_prefetch(reinterpret_cast<const char*>(pf + r * ldw + k0), _MM_HINT_T0);
    }
    #pragma GCC unroll 16
    for (int u = 0; u < kUnroll; ++u) step(k0 + u);
  }
  for (int64_t kk = lenU; kk < len; ++kk) step(kk);
  #pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    #pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_store_ps(acc_io + (r * V + v) * 16, acc[r][v]);
}

// tile() for a runtime number of weight rows 1..RMax (the last block of n).
template <int V, int RMax, int R = RMax>
inline void tile_rows(int rows, const float* wr, int64_t ldw, const float* xt, int64_t len, float* acc_io, bool load,
                      const float* pf) {
  if constexpr (R >= 1) {
    if (rows == R) return tile<R, V>(wr, ldw, xt, len, acc_io, load, pf);
    tile_rows<V, RMax, R - 1>(rows, wr, ldw, xt, len, acc_io, load, pf);
  }
}

// kc elements of `rows` weight rows from src (row stride ldw elements of WT) widened to fp32
// into dst[rows][kc]; the same slice of the next block's rows (pf, or nullptr) is prefetched.
template <DType WT>
void widen_slice(const unsigned char* src, int64_t ldw, int rows, int64_t len, int64_t kc, float* dst,
                 const unsigned char* pf) {
  constexpr int kB = WT == DType::F32 ? 4 : 2;
  const int64_t len16 = len & ~int64_t(15);
  for (int r = 0; r < rows; ++r) {
    const unsigned char* row = src + r * ldw * kB;
    float* out = dst + r * kc;
    for (int64_t kk = 0; kk < len; kk += 16) {
      if (pf && kk % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(pf + (r * ldw + kk) * kB), _MM_HINT_T0);
      const __mmask16 mask = kk < len16 ? __mmask16(0xffff) : __mmask16((1u << (len - kk)) - 1);
      const __m256i h = _mm256_maskz_loadu_epi16(mask, row + kk * kB);
      const __m512 v = WT == DType::BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))
                                         : _mm512_cvtph_ps(h);
      _mm512_mask_storeu_ps(out + kk, mask, v);
    }
  }
}

template <DType WT>
void broadcast_typed(const GemmArgs& a, int64_t n0, int64_t n1) {
  const int64_t m = a.m, k = a.k;
  constexpr int width = kRowsPerBlock, R = kWeightRows;
  const int64_t blocks = (m + width - 1) / width;
  const int last_rows = int(m - (blocks - 1) * width);
  const int last_v = last_rows <= 16 ? 1 : 2;
  thread_local AlignedScratch<float> xt_mem, acc_mem, wide_mem;
  float* const xt_all = xt_mem.get(size_t(blocks * width * k));
  float* const acc_all = acc_mem.get(size_t(blocks * R * width));
  for (int64_t b = 0; b < blocks; ++b) {
    const int bw = b + 1 < blocks ? width : last_v * 16;
    pack_xt(a, b * width, int(std::min<int64_t>(width, m - b * width)), bw, xt_all + b * width * k);
  }
  // fp32 rows of a single block of x stream whole; 16-bit ones are widened a slice at a time.
  // Quantized ones (fp8, 4-bit: WT is F32) are dequantized R whole rows at a time (the AVX2
  // kernels, exact) and then run as fp32 rows, so x^T is packed once a call, not once a slice, and
  // the result is the dequantized weights' (each lane sums over k in order whatever the slices).
  const bool quantized = a.wtype == DType::F8E4M3 || a.wtype == DType::I4;
  const int64_t kc = WT == DType::F32 && blocks == 1 ? k : kKc;
  float* const wide = WT == DType::F32 && !quantized ? nullptr : wide_mem.get(size_t(R * (quantized ? k : kc)));
  constexpr int kB = WT == DType::F32 ? 4 : 2;
  const auto* wbytes = static_cast<const unsigned char*>(a.w);
  for (int64_t j = n0; j < n1; j += R) {
    const int rows = int(std::min<int64_t>(R, n1 - j));
    const bool has_next = j + R + rows <= n1;
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
        if (has_next) pf = wr + R * a.ldw;
      } else {
        const unsigned char* src = wbytes + (j * a.ldw + k0) * kB;
        widen_slice<WT>(src, a.ldw, rows, len, kc, wide, has_next ? src + R * a.ldw * kB : nullptr);
        wr = wide;
        ldw = kc;
      }
      for (int64_t b = 0; b < blocks; ++b) {
        const int v = b + 1 < blocks ? 2 : last_v;
        const float* xt = xt_all + b * width * k + k0 * 16 * v;
        float* acc = acc_all + b * R * width;
        const float* bpf = b == 0 ? pf : nullptr;
        if (v == 2)
          tile_rows<2, R>(rows, wr, ldw, xt, len, acc, k0 > 0, bpf);
        else
          tile_rows<1, R>(rows, wr, ldw, xt, len, acc, k0 > 0, bpf);
      }
    }
    for (int64_t b = 0; b < blocks; ++b)
      store_yt(acc_all + b * R * width, b + 1 < blocks ? width : last_v * 16, a.y + b * width * a.ldy + j, a.ldy,
               std::min<int64_t>(width, m - b * width), rows);
  }
}

}  // namespace

void broadcast_avx512(const GemmArgs& a, int64_t n0, int64_t n1) {
  switch (a.wtype) {
    case DType::F32:
    case DType::F8E4M3:
    case DType::I4: broadcast_typed<DType::F32>(a, n0, n1); break;
    case DType::BF16: broadcast_typed<DType::BF16>(a, n0, n1); break;
    case DType::F16: broadcast_typed<DType::F16>(a, n0, n1); break;
    default: break;  // rejected by gemm_nt
  }
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
