// Rows of a quantized weight dequantized into BF16, for the cuBLAS GEMM of the slice
// (CudaBackend::matmul_nt_scaled): a thread per 8 weights (one 8- or 4-byte load, one 16-byte
// store, 32-bit index arithmetic) where rows and scale groups hold whole such runs, else a thread
// per weight. CPU twin:
// dequant_fp8_portable / dequant_int4_portable (src/backend/cpu/gemm/gemm_dequant.cpp), which
// dequantize into fp32; here the fp32 value is then rounded to BF16, the GEMM's operand type.
#include <string>

#include "kernels.h"
#include "quantized_weight.cuh"

namespace tpbatch::kernels {
namespace {

template <bool kInt4>
__global__ void dequantize_rows_kernel(QuantGrid g, int64_t r0, int64_t rows, int64_t k, __nv_bfloat16* out) {
  const size_t count = size_t(rows) * size_t(k);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const int64_t r = int64_t(i / size_t(k)), c = int64_t(i % size_t(k));
    out[i] = __float2bfloat16_rn(dequantized<kInt4>(g, r0 + r, c));
  }
}

// Runs of 8 weights, never across a row or a scale group; count = rows * (k / 8) < 2^32.
template <bool kInt4>
__global__ void dequantize_runs_kernel(QuantGrid g, int64_t r0, uint32_t runs_per_row, uint32_t count,
                                       __nv_bfloat16* out) {
  for (uint32_t u = blockIdx.x * blockDim.x + threadIdx.x; u < count; u += gridDim.x * blockDim.x) {
    const uint32_t r = u / runs_per_row, c0 = (u - r * runs_per_row) * 8;
    const int64_t row = r0 + r;
    const int64_t si = row * g.groups + (c0 + uint32_t(g.phase)) / uint32_t(g.group);
    const float scale = g.scales[si];
    Pack<__nv_bfloat16> pk;
    if constexpr (kInt4) {
      const uint32_t q = *reinterpret_cast<const uint32_t*>(g.values + row * g.ldv + c0 / 2);
      const float zero = g.zeros[si];
#pragma unroll
      for (int j = 0; j < 8; ++j) pk.v[j] = __float2bfloat16_rn((float((q >> (4 * j)) & 0xfu) - zero) * scale);
    } else {
      const uint2 q = *reinterpret_cast<const uint2*>(g.values + row * g.ldv + c0);
#pragma unroll
      for (int j = 0; j < 8; ++j)
        pk.v[j] = __float2bfloat16_rn(fp8_e4m3_to_float(((j < 4 ? q.x : q.y) >> (8 * (j % 4))) & 0xffu) * scale);
    }
    store_pack(out + size_t(u) * 8, pk);
  }
}

}  // namespace

QuantGrid quant_grid(const ScaledWeightView& w, int64_t k, const char* op) {
  const std::string where = std::string("CUDA backend: ") + op + ": ";
  const bool int4 = w.values.dtype == DType::I4;
  if (!int4 && w.values.dtype != DType::F8E4M3)
    throw Error(where + "quantized weights of dtype " + dtype_name(w.values.dtype) +
                " are not supported (F8_E4M3 or I4 are)");
  if (w.scales.dtype != DType::F32 || (int4 && (w.zeros.empty() || w.zeros.dtype != DType::F32)))
    throw Error(where + dtype_name(w.values.dtype) + " weights need F32 scales" + (int4 ? " and F32 zero points" : ""));
  if (w.group <= 0 || w.phase < 0 || w.groups * w.group < w.phase + k)
    throw Error(where + "scale groups (" + std::to_string(w.groups) + " of " + std::to_string(w.group) + ", phase " +
                std::to_string(w.phase) + ") do not cover " + std::to_string(k) + " columns");
  QuantGrid g;
  g.values = w.values.as<const uint8_t>();
  g.scales = w.scales.as<const float>();
  g.zeros = int4 ? w.zeros.as<const float>() : nullptr;
  g.ldv = int4 ? (k + 1) / 2 : k;
  g.groups = w.groups;
  g.group = w.group;
  g.phase = w.phase;
  g.int4 = int4;
  return g;
}

void dequantize_rows(const ScaledWeightView& w, int64_t r0, int64_t rows, int64_t k, BufferView out,
                     cudaStream_t stream) {
  if (rows <= 0 || k <= 0) return;
  if (out.dtype != DType::BF16) unsupported("dequantize_rows", "output", out.dtype);
  const QuantGrid g = quant_grid(w, k, "dequantize_rows");
  const size_t count = size_t(rows) * size_t(k);
  const auto aligned = [](const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  if (k % 8 == 0 && g.group % 8 == 0 && g.phase % 8 == 0 && g.phase + k < (int64_t{1} << 31) &&
      count / 8 < (size_t{1} << 32) && aligned(g.values, g.int4 ? 4 : 8) && aligned(out.data, 16)) {
    const auto runs = uint32_t(k / 8), total = uint32_t(count / 8);
    if (g.int4)
      dequantize_runs_kernel<true><<<grid_for(total, 256), 256, 0, stream>>>(g, r0, runs, total, out.as<__nv_bfloat16>());
    else
      dequantize_runs_kernel<false><<<grid_for(total, 256), 256, 0, stream>>>(g, r0, runs, total, out.as<__nv_bfloat16>());
    return;
  }
  if (g.int4)
    dequantize_rows_kernel<true><<<grid_for(count, 256), 256, 0, stream>>>(g, r0, rows, k, out.as<__nv_bfloat16>());
  else
    dequantize_rows_kernel<false><<<grid_for(count, 256), 256, 0, stream>>>(g, r0, rows, k, out.as<__nv_bfloat16>());
}

}  // namespace tpbatch::kernels
