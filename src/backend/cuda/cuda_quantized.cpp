// Quantized weights (F8_E4M3, or I4 with zero points; backend.h's ScaledWeightView) on CUDA. They
// stay quantized in device memory; each product dequantizes them on the fly:
// - a few rows of x (decode, m <= kQuantizedGemvMaxRows): quantized_gemv.cu, the weights
//   dequantized in registers, so a step reads each weight's one byte or half byte once;
// - more rows (prefill): a slice of output rows at a time dequantized into a BF16 scratch
//   (dequantize.cu, bounded by backend/dequantize_slices.h), then the BF16 cuBLAS GEMM of the slice
//   writes those columns of y. FP8 tensor-core GEMMs (cuBLASLt) are not used: they would round
//   the activations to fp8 as well, and the results would leave the CPU's.
// I8 (W8A8) weights multiply x quantized to int8 per row, as the checkpoint's activation scheme
// says (int8_gemm.cu): the same integers and scales as the CPU's gemm_nt_int8.
// The CPU twin (src/backend/cpu/gemm/gemm_dequant.cpp) computes in fp32 on the same fp32 weights;
// the BF16 slice rounds each weight once more, as a BF16 checkpoint's weights are.
#include <algorithm>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "backend/dequantize_slices.h"
#include "common/error.h"

namespace tpbatch {

void CudaBackend::matmul_nt_scaled(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n,
                                   int64_t k) {
  if (m == 0 || n == 0) return;
  if (w.values.dtype == DType::I8) return matmul_nt_int8(x, w, y, m, n, k);
  if (m <= kernels::kQuantizedGemvMaxRows) {
    kernels::quantized_gemv(x, w, y, m, n, k, stream_);
    TPBATCH_CUDA_LAUNCHED("quantized_gemv");
    return;
  }
  if (y.dtype != DType::F32 && y.dtype != DType::BF16)
    throw Error(std::string("CUDA backend: matmul_nt_scaled: output of dtype ") + dtype_name(y.dtype) +
                " is not supported");
  BufferView xb = x;
  if (x.dtype != DType::BF16) {
    xb = BufferView{scratch(gemm_x_, static_cast<size_t>(m * k) * 2, "CUDA matmul scratch"), DType::BF16};
    kernels::convert(x, xb, static_cast<size_t>(m * k), stream_);
    TPBATCH_CUDA_LAUNCHED("convert (matmul_nt_scaled input)");
  }
  const int64_t rows = dequantize_slice_rows(n, k);
  const BufferView slice{scratch(dequantized_, static_cast<size_t>(dequantize_scratch_bytes(n, k)),
                                 "CUDA dequantize scratch", true),
                         DType::BF16};
  // The slices take turns in one scratch: the stream orders each GEMM's read before the next
  // slice's writes.
  for (int64_t r0 = 0; r0 < n; r0 += rows) {
    const int64_t count = std::min(rows, n - r0);
    kernels::dequantize_rows(w, r0, count, k, slice, stream_);
    TPBATCH_CUDA_LAUNCHED("dequantize_rows");
    cublas_nt(xb, slice, y.at(r0), m, count, k, n);
  }
}

void CudaBackend::matmul_nt_int8(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n,
                                 int64_t k) {
  // One scale per output row (per channel or per tensor, model/quantization.h).
  if (w.scales.dtype != DType::F32 || w.groups != 1)
    throw Error("CUDA backend: matmul_nt_scaled: I8 weights need one F32 scale per output row, got " +
                std::to_string(w.groups) + " " + dtype_name(w.scales.dtype) + " scales a row");
  if (!w.input_amax.empty() && w.input_amax.dtype != DType::F32)
    throw Error(std::string("CUDA backend: matmul_nt_scaled: input_amax of dtype ") + dtype_name(w.input_amax.dtype) +
                " is not supported");
  const size_t q_bytes = (static_cast<size_t>(m * k) + 15) / 16 * 16;  // the row scales 16-byte aligned after
  auto* base = static_cast<uint8_t*>(scratch(int8_x_, q_bytes + static_cast<size_t>(m) * 4, "CUDA int8 x scratch"));
  auto* xq = reinterpret_cast<int8_t*>(base);
  auto* xscale = reinterpret_cast<float*>(base + q_bytes);
  kernels::int8_quantize_rows(x, w.input_amax.empty() ? nullptr : w.input_amax.as<float>(), xq, xscale, m, k, stream_);
  TPBATCH_CUDA_LAUNCHED("int8_quantize_rows");
  kernels::int8_gemm(xq, xscale, w.values.as<int8_t>(), w.scales.as<float>(), y, m, n, k, stream_);
  TPBATCH_CUDA_LAUNCHED("int8_gemm");
}

void CudaBackend::int8_row_amax(BufferView x, BufferView amax, int64_t m, int64_t k) {
  kernels::int8_row_amax(x, amax, m, k, stream_);
  TPBATCH_CUDA_LAUNCHED("int8_row_amax");
}

}  // namespace tpbatch
