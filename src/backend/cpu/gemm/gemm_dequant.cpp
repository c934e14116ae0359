// Quantized weights with fp32 scales, dequantized a few rows at a time into fp32 for gemm.cpp's
// kernels: fp8 (e4m3) as value * scale, 4-bit integers as (value - zero) * scale (value - zero is
// an exact small integer), one rounding each, so the result equals a checkpoint dequantized ahead
// (tools' --dequantize twin) bit for bit. A row is walked one scale group at a time, so the inner
// loop is a plain vector loop with one scale (and zero).
//
// e4m3 -> fp32: the 7 exponent and mantissa bits moved to fp32's places and multiplied by 2^120
// (the bias 7 -> 127), exact for subnormals too; 0x7f / 0xff are NaN (dtype.cpp's f8e4m3_to_f32).
// The AVX2 kernels go through fp16 instead, two integer ops and one conversion for 8 weights
// rather than eight ops: the byte sign-extended to 16 bits and shifted left by 7 puts the 7 bits
// in fp16's places and the sign in its sign bit (bit 14, a copy of the sign, is cleared), which is
// the e4m3 value times 2^-8 exactly (bias 7 -> 15), subnormals included; 2^8 goes into the scale
// (exact: a power of two, for scales below 2^120), so each weight is still value * scale rounded
// once. The NaN codes come out finite there: the loader refuses fp8 weights holding them.
// As in gemm_avx2.cpp, every standard header comes BEFORE the target pragma.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/gemm/gemm_kernels.h"

namespace tpbatch::cpu::detail {
namespace {

inline float fp8_portable(uint8_t b) {
  const uint32_t mag = b & 0x7fu;
  uint32_t bits = mag << 20;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 0x1.0p120f;
  std::memcpy(&bits, &f, 4);
  bits |= uint32_t(b & 0x80u) << 24;
  bits = mag == 0x7fu ? 0x7fc00000u : bits;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Calls seg(c0, c1, i) for the column ranges of weight row r that share a scale (and zero):
// a.scales[i], a.zeros[i].
template <typename Seg>
inline void for_each_group(const GemmArgs& a, int64_t r, Seg&& seg) {
  for (int64_t c = 0; c < a.k;) {
    const int64_t g = (c + a.phase) / a.group;
    const int64_t end = std::min(a.k, (g + 1) * a.group - a.phase);
    seg(c, end, r * a.groups + g);
    c = end;
  }
}

inline float int4_at(const uint8_t* row, int64_t c) { return float((row[c >> 1] >> (4 * (c & 1))) & 0xf); }

}  // namespace

void dequant_int4_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i], z = a.zeros[i];
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dst[c] = (int4_at(src, c) - z) * s;
    });
  }
}

void dequant_fp8_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i];
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) dst[c] = fp8_portable(src[c]) * s;
    });
  }
}

}  // namespace tpbatch::cpu::detail

#if defined(TPBATCH_GEMM_HAVE_AVX2)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")

namespace tpbatch::cpu::detail {
namespace {

// Eight e4m3 values as fp32, times 2^-8 (not NaN codes; see the top of the file).
constexpr float kFp8ViaFp16 = 0x1.0p8f;  // what the scale takes back
inline __m256 fp8x8(const uint8_t* p) {
  int64_t raw;
  std::memcpy(&raw, p, 8);
  const __m128i h = _mm_slli_epi16(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(raw)), 7);
  return _mm256_cvtph_ps(_mm_and_si128(h, _mm_set1_epi16(int16_t(0xbf80))));
}

// Eight 4-bit values from column kk (a multiple of 8) of a row packed two a byte, as fp32.
inline __m256 int4x8(const uint8_t* row, int64_t kk) {
  uint32_t raw;
  std::memcpy(&raw, row + kk / 2, 4);
  const __m256i nib = _mm256_srlv_epi32(_mm256_set1_epi32(int(raw)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
  return _mm256_cvtepi32_ps(_mm256_and_si256(nib, _mm256_set1_epi32(0xf)));
}

}  // namespace

void dequant_int4_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i], z = a.zeros[i];
      const __m256 sv = _mm256_set1_ps(s), zv = _mm256_set1_ps(z);
      int64_t c = c0;
      for (; c < c1 && c % 8 != 0; ++c) dst[c] = (int4_at(src, c) - z) * s;
      for (; c + 8 <= c1; c += 8) _mm256_storeu_ps(dst + c, _mm256_mul_ps(_mm256_sub_ps(int4x8(src, c), zv), sv));
      for (; c < c1; ++c) dst[c] = (int4_at(src, c) - z) * s;
    });
  }
}

void dequant_fp8_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* src = static_cast<const uint8_t*>(a.w) + (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    for_each_group(a, r0 + r, [&](int64_t c0, int64_t c1, int64_t i) {
      const float s = a.scales[i];
      const __m256 sv = _mm256_set1_ps(s * kFp8ViaFp16);
      int64_t c = c0;
      for (; c + 8 <= c1; c += 8) _mm256_storeu_ps(dst + c, _mm256_mul_ps(fp8x8(src + c), sv));
      for (; c < c1; ++c) dst[c] = fp8_portable(src[c]) * s;
    });
  }
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX2
