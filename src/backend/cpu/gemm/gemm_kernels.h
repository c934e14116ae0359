#pragma once
// Internal to gemm.cpp: the kernel families behind gemm_nt, one file each (gemm_portable.cpp,
// gemm_avx2.cpp). Each computes y[:, n0:n1) for all m rows of x; the caller splits n over threads.
#include <cstdint>

#include "backend/dtype.h"

namespace tpbatch::cpu::detail {

struct GemmArgs {
  const float* x;
  int64_t ldx;
  const void* w;  // [n][ldw] elements of wtype
  int64_t ldw;
  DType wtype;
  float* y;
  int64_t ldy;
  int64_t m, n, k;
  // F8E4M3 and I4 weights only: weight row r's scales, scales[r * groups + (c + phase) / group]
  // for column c (backend.h's ScaledWeightView); I4 weights' zero points laid out alike. I4: ldw
  // counts bytes of two values.
  const float* scales = nullptr;
  int64_t groups = 0, group = 0, phase = 0;
  const float* zeros = nullptr;
};

// Row-blocked kernel: a block of weight rows is read once and used for every row of x.
void rows_portable(const GemmArgs& a, int64_t n0, int64_t n1);
// Weight rows [r0, r0 + rows) widened to fp32 into out[rows][k] (F8E4M3: dequantized,
// gemm_dequant.cpp).
void widen_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out);
void dequant_fp8_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out);
void dequant_int4_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out);

// W8A8 (gemm_int8.cpp): rows of x already quantized to int8 (gemm.h's gemm_nt_int8), against
// int8 weight rows [n0, n1) with one scale each.
struct Int8Args {
  const int8_t* xq;      // [m][k]
  const float* xscale;   // [m]
  const int32_t* xsum;   // [m]: sum of each row's q (the VNNI kernel's offset correction)
  const int8_t* w;       // [n][k]
  const float* wscale;   // [n]
  float* y;              // [m][ldy]
  int64_t ldy, m, n, k;
};
void int8_rows_portable(const Int8Args& a, int64_t n0, int64_t n1);

#if defined(__x86_64__) || defined(__i386__)
// AVX2 + FMA + F16C (callers check the CPU first).
void rows_avx2(const GemmArgs& a, int64_t n0, int64_t n1);
void widen_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out);
void dequant_fp8_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out);
void dequant_int4_avx2(const GemmArgs& a, int64_t r0, int64_t rows, float* out);
// One row of x against fp8 or int4 weights with the scales (and zero points) applied per group
// (gemm_quant_m1_avx2.cpp): the dequantized weights' results to fp32 accumulation noise, not to
// the last bit. False, having done nothing, unless m = 1 and the scale groups fall on 16-column
// boundaries (and, fp8, |x| <= 2^60).
bool quant_rows_m1_avx2(const GemmArgs& a, int64_t n0, int64_t n1);
// Broadcast-weight kernel (y^T = W · x^T on x^T packed 16 rows wide), for m of about 8..64; fp8
// and 4-bit weights are dequantized a block of rows at a time (the fp32 result on those weights).
void broadcast_avx2(const GemmArgs& a, int64_t n0, int64_t n1);
// W8A8 on AVX2 (gemm_int8_avx2.cpp): vpmaddubsw on |w| against x given w's sign, then vpmaddwd;
// no int16 lane can saturate, so the same integers as the portable kernel.
void int8_rows_avx2(const Int8Args& a, int64_t n0, int64_t n1);
#define TPBATCH_GEMM_HAVE_AVX2 1
#endif

#if defined(__x86_64__) && (defined(__clang__) || __GNUC__ >= 10)
// AVX512F/BW/VL/DQ (gemm_avx512.cpp): the broadcast kernel on zmm registers, every weight type.
void broadcast_avx512(const GemmArgs& a, int64_t n0, int64_t n1);
// AVX512_BF16 (gemm_avx512_bf16.cpp): bf16 weights through vdpbf16ps, activations split into two
// bf16 terms; the row-blocked form, for a few rows of x.
void rows_bf16dp(const GemmArgs& a, int64_t n0, int64_t n1);
// x[0..k) as kSplitTerms bf16 terms (hi = bf16(x), mid = bf16(x - hi), lo = bf16(x - hi - mid):
// their sum is x to fp32's rounding), term t at terms + t * kpad, each zero-padded to kpad (a
// multiple of 32); terms 64-byte aligned. For the vdpbf16ps and AMX kernels.
inline constexpr int kSplitTerms = 3;
void split_bf16(const float* x, int64_t k, int64_t kpad, uint16_t* terms);
// 4-bit weights, one row of x (gemm_dequant_avx512.cpp): the row-blocked fp32 kernel's results
// on the dequantized weights to the last bit. False, having done nothing, unless m = 1 and the
// scale groups fall on 8-column boundaries.
bool int4_rows_m1_avx512(const GemmArgs& a, int64_t n0, int64_t n1);
// AVX512-VNNI (gemm_int8_vnni.cpp): vpdpbusd takes unsigned x signed bytes, so the weights go in
// as w + 128 (w xor 0x80) and each row's 128 * sum(q) comes off again; the same integers as the
// portable kernel.
void int8_rows_vnni(const Int8Args& a, int64_t n0, int64_t n1);
#define TPBATCH_GEMM_HAVE_AVX512 1
#endif

#if defined(TPBATCH_GEMM_HAVE_AVX512) && defined(__linux__) && !defined(__clang__) && __GNUC__ >= 11
// AMX-TILE + AMX-BF16 (gemm_amx.cpp): bf16 weights on tiles, x split as for vdpbf16ps.
// amx_bf16_usable() checks the CPU and asks Linux for the tile state (once per process).
bool amx_bf16_usable();
void bf16_amx(const GemmArgs& a, int64_t n0, int64_t n1);
#define TPBATCH_GEMM_HAVE_AMX 1
#endif

}  // namespace tpbatch::cpu::detail
