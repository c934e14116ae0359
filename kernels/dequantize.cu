// Rows of a quantized weight dequantized into BF16, for the cuBLAS GEMM of the slice
// (CudaBackend::matmul_nt_scaled): one thread per weight, plain grid-stride. CPU twin:
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
  if (g.int4)
    dequantize_rows_kernel<true><<<grid_for(count, 256), 256, 0, stream>>>(g, r0, rows, k, out.as<__nv_bfloat16>());
  else
    dequantize_rows_kernel<false><<<grid_for(count, 256), 256, 0, stream>>>(g, r0, rows, k, out.as<__nv_bfloat16>());
}

}  // namespace tpbatch::kernels
