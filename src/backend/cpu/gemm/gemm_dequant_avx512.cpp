// 4-bit weights, one row of x, on AVX-512VL: quant_rows_m1.h's kernel (the same FMAs and lane sums
// as the AVX2 one, bit for bit) with one instruction fewer per 8 weights: the nibble is masked and
// turned into the float 2^23 + q by one ternary-logic op, (nibble & 0xf) | 0x4b000000, instead of
// a mask and an int-to-float conversion; subtracting 2^23 + zero gives q - zero exactly (both are
// small integers, 2^23 + 16 is exact), so the weights are the AVX2 kernel's to the last bit. The
// zero points must be integers (0..16), as every 4-bit checkpoint's are. ymm registers: the 8-lane
// accumulation order of the fp32 kernel is what keeps the results equal.
// As in gemm_avx512.cpp, every standard header comes BEFORE the target pragma.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cpu/gemm/gemm_kernels.h"

#if defined(TPBATCH_GEMM_HAVE_AVX512)
#include "backend/cpu/gemm/avx512_intrinsics.h"  // <immintrin.h>, without GCC 12's false warnings

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#include "backend/cpu/gemm/quant_rows_m1.h"  // after the pragma: compiled for this ISA

namespace tpbatch::cpu::detail {
namespace {

struct Int4RowsVl {
  static int64_t bytes(int64_t c) { return (c + 1) / 2; }
  static __m256 load(const uint8_t* row, int64_t kk) {
    uint32_t raw;
    std::memcpy(&raw, row + kk / 2, 4);
    const __m256i nib = _mm256_srlv_epi32(_mm256_set1_epi32(int(raw)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    // 0xea: (a & b) | c.
    return _mm256_castsi256_ps(
        _mm256_ternarylogic_epi32(nib, _mm256_set1_epi32(0xf), _mm256_set1_epi32(0x4b000000), 0xea));
  }
  static float scale(float s) { return s; }
  static float zero(float z) { return 0x1.0p23f + z; }
  static __m256 dequant(__m256 v, __m256 scale, __m256 zero) { return _mm256_mul_ps(_mm256_sub_ps(v, zero), scale); }
};

}  // namespace

void int4_rows_m1_avx512(const GemmArgs& a, int64_t n0, int64_t n1) { quant_rows_m1<Int4RowsVl>(a, n0, n1); }

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
