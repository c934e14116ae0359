#pragma once
// One quantized weight as fp32, computed as the CPU's dequantizing GEMM computes it
// (src/backend/cpu/gemm/gemm_dequant.cpp, dequant_fp8_portable / dequant_int4_portable), so both
// backends start from the same fp32 value: e4m3 * scale, or (int4 - zero) * scale, one rounding.
// Shared by dequantize.cu and quantized_gemv.cu.
#include "common.cuh"

namespace tpbatch::kernels {

// backend.h's ScaledWeightView as raw device pointers: value (r, c) is byte r * ldv + c (F8_E4M3)
// or nibble c of row r, low nibble first (I4); its scale and zero are at r * groups + (c + phase) / group.
struct QuantGrid {
  const uint8_t* values = nullptr;
  const float* scales = nullptr;
  const float* zeros = nullptr;  // I4 only
  int64_t ldv = 0, groups = 1, group = 1, phase = 0;
  bool int4 = false;
};

// The grid of w for a [n, k] product; throws Error naming `op` unless w is F8_E4M3 with F32 scales
// or I4 with F32 scales and zeros whose groups cover every row's columns.
QuantGrid quant_grid(const ScaledWeightView& w, int64_t k, const char* op);

// e4m3 -> fp32, exact and free of fp32 subnormals (so a flush-to-zero build changes nothing):
// normal values move their exponent (bias 7 -> 127) and mantissa into place; subnormals are
// mantissa x 2^-9; 0x7f / 0xff are NaN. The CPU's fp8_portable gives the same values.
__device__ __forceinline__ float fp8_e4m3_to_float(unsigned b) {
  const unsigned mag = b & 0x7fu, exponent = mag >> 3, mantissa = mag & 7u;
  float f = exponent == 0 ? float(mantissa) * 0x1.0p-9f : __uint_as_float(((exponent + 120u) << 23) | (mantissa << 20));
  f = mag == 0x7fu ? __uint_as_float(0x7fc00000u) : f;
  return (b & 0x80u) ? -f : f;
}

template <bool kInt4>
__device__ __forceinline__ float dequantized(const QuantGrid& g, int64_t r, int64_t c) {
  const int64_t i = r * g.groups + (c + g.phase) / g.group;
  if (kInt4) {
    const unsigned v = (unsigned(g.values[r * g.ldv + (c >> 1)]) >> (4 * (c & 1))) & 0xfu;
    return (float(v) - g.zeros[i]) * g.scales[i];
  }
  return fp8_e4m3_to_float(g.values[r * g.ldv + c]) * g.scales[i];
}

}  // namespace tpbatch::kernels
