// 4-bit weights, one row of x, on AVX-512VL: quant_rows_m1.h's kernel (the same FMAs and lane sums
// as the AVX2 one, bit for bit) with the dequantization a table lookup: a scale group's 16 weights
// (q - zero) * scale, q = 0..15, are computed once (the AVX2 kernel's very operations, so the
// same values to the last bit, whatever the zero point) into two ymm registers, and vpermt2ps picks
// each weight by its nibble, which needs no mask (it reads the index's low 4 bits). Per 8 weights:
// a broadcast load, a shift, the lookup and the FMA, against a mask, a conversion, a subtraction and
// a multiplication more (on a Zen 4, tpbatch_quantized_gemv_bench --threads 1 --hot 1: 146 -> 109
// us on the 3072 x 768 shape). ymm registers: the 8-lane
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
  // The 8 nibbles from column kk, each in the low bits of its lane (higher bits: the nibbles after it).
  static __m256 load(const uint8_t* row, int64_t kk) {
    uint32_t raw;
    std::memcpy(&raw, row + kk / 2, 4);
    return _mm256_castsi256_ps(
        _mm256_srlv_epi32(_mm256_set1_epi32(int(raw)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)));
  }
  static void group(float s, float z, __m256& q0_7, __m256& q8_15) {
    const __m256 sv = _mm256_set1_ps(s), zv = _mm256_set1_ps(z);
    q0_7 = _mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), zv), sv);
    q8_15 = _mm256_mul_ps(_mm256_sub_ps(_mm256_setr_ps(8, 9, 10, 11, 12, 13, 14, 15), zv), sv);
  }
  static __m256 dequant(__m256 nibbles, __m256 q0_7, __m256 q8_15) {
    return _mm256_permutex2var_ps(q0_7, _mm256_castps_si256(nibbles), q8_15);
  }
};

}  // namespace

void int4_rows_m1_avx512(const GemmArgs& a, int64_t n0, int64_t n1) { quant_rows_m1<Int4RowsVl>(a, n0, n1); }

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options
#endif  // TPBATCH_GEMM_HAVE_AVX512
