// One row of x (a sequence decoding) against fp8 or 4-bit weight rows on AVX2, with each scale
// group's scale (and zero point) applied once per group and row instead of once per weight:
//   y_r = sum over groups g of s_rg * (sum_{c in g} q_rc x_c - z_rg * sum_{c in g} x_c).
// Per 16 weights that leaves an unpack and two FMAs: 4-bit, a zero-extending byte load, a mask and
// two conversions; fp8, a sign-extending load, two shifts and two masks (no conversion: see
// below). The dequantize-then-FMA form took 12 to 14 ops (a subtraction and a multiplication per
// 8 weights more, and 8-weight unpacks), which left both formats compute-bound below the bf16 GEMV
// on a Zen 3 (tpbatch_quantized_gemv_bench --threads 1 --hot 1, 3072 x 768: fp8 246 us, 4-bit
// 220, bf16 135; now fp8 139, 4-bit 120).
// The price is exactness: the dequantize-ahead twin rounds each weight (q - z) * s once, this
// kernel rounds the group's sums instead, so the results agree to fp32 accumulation noise rather
// than to the last bit (below 2e-7 of sum |w x| in the tests). The kernels for more rows of x
// dequantize slices and stay exact.
//
// x is staged once a call, 16 columns a step, zero-padded, as two vectors whose lane i goes with
// columns 2i and 2i + 1 (Step::stage):
//   4-bit: the 8 bytes of 16 columns zero-extended to 8 lanes; the low nibble (column 2i) masked
//          out, and the whole byte b = q0 + 16 q1 taken as it is, x staged to match.
//   fp8:   the 16 bytes sign-extended to 16-bit words, so each 32-bit lane holds column 2i's word
//          below column 2i + 1's. Shifted left by 20 or 4 and masked to the sign and the bits
//          20..26 below it, the lane is the byte's 7 exponent and mantissa bits in fp32's places
//          under its sign: the e4m3 value times 2^-120 exactly (bias 7 -> 127), e4m3 subnormals
//          landing on fp32 subnormals. x is staged times 2^64 so that the products stay normal,
//          and the group scale takes 2^56 back; x beyond 2^60 in magnitude (or not finite) is
//          left to the dequantizing path.
// As in gemm_avx2.cpp, every standard header comes BEFORE the target pragma.
#include <algorithm>
#include <cmath>
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
#include "backend/cpu/gemm/kernel_staging.h"  // likewise

namespace tpbatch::cpu::detail {
namespace {

// Each 32-bit lane of a step holds an even column's weight and the next (odd) column's: the staged
// x comes as a pair of vectors, (lo, hi), that the unpacked pair of weight vectors multiplies.
struct Int4Step {
  static constexpr int64_t kBytes = 8;  // a row's bytes per 16 columns
  static constexpr float kScaleBack = 1.0f;
  static int64_t row_bytes(int64_t k) { return (k + 1) / 2; }
  // The low nibble q0 and the whole byte b = q0 + 16 q1 as floats: q0 e + q1 o is
  // q0 (e - o / 16) + b (o / 16), which saves the shift that would take q1 out of b.
  static void stage(float even, float odd, float& lo, float& hi) {
    lo = even - odd * 0.0625f;
    hi = odd * 0.0625f;
  }
  static void unpack(const uint8_t* p, __m256& lo, __m256& hi) {
    const __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_cvtepi32_ps(_mm256_and_si256(b, _mm256_set1_epi32(0xf)));
    hi = _mm256_cvtepi32_ps(b);
  }
};

struct Fp8Step {
  static constexpr int64_t kBytes = 16;
  static constexpr float kScaleBack = 0x1.0p56f;  // 2^-120 (the weights) * 2^64 (x) * 2^56 = 1
  static int64_t row_bytes(int64_t k) { return k; }
  static void stage(float even, float odd, float& lo, float& hi) {
    lo = even * 0x1.0p64f;
    hi = odd * 0x1.0p64f;
  }
  static void unpack(const uint8_t* p, __m256& lo, __m256& hi) {
    const __m256i words = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i mask = _mm256_set1_epi32(int32_t(0x87f00000u));
    lo = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(words, 20), mask));
    hi = _mm256_castsi256_ps(_mm256_and_si256(_mm256_slli_epi32(words, 4), mask));
  }
};

// x staged for Step (kpad = k rounded up to 16 floats: 8 lo lanes, then 8 hi lanes, a step) and,
// per scale group the columns cross, the lane sums of x's even and odd columns over it (the zero
// points' term). False when x is out of the staged range.
template <class Step>
bool stage_x(const GemmArgs& a, int64_t kpad, float* xs, float* group_sums) {
  float top = 0.0f;
  for (int64_t c = 0; c < a.k; ++c) top = std::max(top, std::fabs(a.x[c]));
  if (!(top <= 0x1.0p60f)) return false;
  const int64_t g0 = a.phase / a.group;
  for (int64_t c = 0; c < kpad;) {
    const int64_t g = (c + a.phase) / a.group, end = std::min(kpad, (g + 1) * a.group - a.phase);
    alignas(32) float sum[8] = {};
    for (; c < end; c += 16)
      for (int lane = 0; lane < 8; ++lane) {
        const int64_t e = c + 2 * lane;
        const float even = e < a.k ? a.x[e] : 0.0f, odd = e + 1 < a.k ? a.x[e + 1] : 0.0f;
        Step::stage(even, odd, xs[c + lane], xs[c + 8 + lane]);
        sum[lane] += even + odd;
      }
    std::memcpy(group_sums + 8 * (g - g0), sum, sizeof sum);
  }
  return true;
}

// R weight rows from row j. pf: the next block's rows, prefetched a line at a time in address
// order as this block's steps go by (as many lines as this block reads).
template <int R, class Step>
inline void folded_block(const GemmArgs& a, const float* xs, const float* group_sums, int64_t j,
                         const uint8_t* pf) {
  const auto* w = static_cast<const uint8_t*>(a.w) + j * a.ldw;
  const float* sc = a.scales + j * a.groups;
  const float* zp = a.zeros ? a.zeros + j * a.groups : nullptr;
  const int64_t k16 = a.k & ~int64_t(15), kpad = (a.k + 15) & ~int64_t(15);
  const int64_t g0 = a.phase / a.group, pf_end = R * a.ldw;
  int64_t pf_line = 0, pf_due = 0;
  __m256 total[R];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) total[r] = _mm256_setzero_ps();
  for (int64_t c = 0; c < kpad;) {
    const int64_t g = (c + a.phase) / a.group, end = std::min(kpad, (g + 1) * a.group - a.phase);
    __m256 acc[R];
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    auto step = [&](int64_t kk, const uint8_t* const* rows) __attribute__((always_inline)) {
      const __m256 xlo = _mm256_load_ps(xs + kk), xhi = _mm256_load_ps(xs + kk + 8);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256 lo, hi;
        Step::unpack(rows[r], lo, hi);
        acc[r] = _mm256_fmadd_ps(lo, xlo, acc[r]);
        acc[r] = _mm256_fmadd_ps(hi, xhi, acc[r]);
      }
    };
    const int64_t body_end = std::min(end, k16);
    for (int64_t kk = c; kk < body_end; kk += 16) {
      for (pf_due += R * Step::kBytes; pf_line < pf_due && pf_line < pf_end; pf_line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(pf + pf_line), _MM_HINT_T0);
      const uint8_t* rows[R];
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) rows[r] = w + r * a.ldw + kk / 16 * Step::kBytes;
      step(kk, rows);
    }
    if (end > k16) {  // the k % 16 tail, from zero-padded copies of the rows' last bytes
      alignas(16) uint8_t tail[R][16] = {};
      const uint8_t* rows[R];
      const int64_t from = k16 / 16 * Step::kBytes;
      for (int r = 0; r < R; ++r) {
        std::memcpy(tail[r], w + r * a.ldw + from, size_t(Step::row_bytes(a.k) - from));
        rows[r] = tail[r];
      }
      step(k16, rows);
    }
    const __m256 xsum = _mm256_load_ps(group_sums + 8 * (g - g0));
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 s = _mm256_set1_ps(sc[r * a.groups + g] * Step::kScaleBack);
      const __m256 q = zp ? _mm256_fnmadd_ps(_mm256_set1_ps(zp[r * a.groups + g]), xsum, acc[r]) : acc[r];
      total[r] = _mm256_fmadd_ps(q, s, total[r]);
    }
    c = end;
  }
  if constexpr (R % 4 == 0) {
    #pragma GCC unroll 2
    for (int r = 0; r < R; r += 4) _mm_storeu_ps(a.y + j + r, sum4(total[r], total[r + 1], total[r + 2], total[r + 3]));
  } else {
    a.y[j] = sum1(total[0]) + 0.0f;
  }
}

template <class Step>
bool folded_rows(const GemmArgs& a, int64_t n0, int64_t n1) {
  const int64_t kpad = (a.k + 15) & ~int64_t(15);
  const int64_t spans = (a.phase + kpad - 1) / a.group - a.phase / a.group + 1;  // groups the columns cross
  thread_local AlignedScratch<float> scratch;
  float* xs = scratch.get(size_t(kpad + 8 * spans));
  float* group_sums = xs + kpad;
  if (!stage_x<Step>(a, kpad, xs, group_sums)) return false;
  const auto* w = static_cast<const uint8_t*>(a.w);
  int64_t j = n0;
  for (; j + 8 <= n1; j += 8) folded_block<8, Step>(a, xs, group_sums, j, w + (j + 16 <= n1 ? j + 8 : j) * a.ldw);
  for (; j + 4 <= n1; j += 4) folded_block<4, Step>(a, xs, group_sums, j, w + (j + 8 <= n1 ? j + 4 : j) * a.ldw);
  for (; j < n1; ++j) folded_block<1, Step>(a, xs, group_sums, j, w + j * a.ldw);
  return true;
}

}  // namespace

bool quant_rows_m1_avx2(const GemmArgs& a, int64_t n0, int64_t n1) {
  if (a.m != 1 || a.group % 16 != 0 || a.phase % 16 != 0) return false;
  return a.wtype == DType::I4 ? folded_rows<Int4Step>(a, n0, n1) : folded_rows<Fp8Step>(a, n0, n1);
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX2
