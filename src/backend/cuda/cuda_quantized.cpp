// Quantized weights (F8_E4M3, or I4 with zero points; backend.h's ScaledWeightView) on CUDA. They
// stay quantized in device memory; each product dequantizes them on the fly:
// - a few rows of x (decode, m <= kQuantizedGemvMaxRows): quantized_gemv.cu, the weights
//   dequantized in registers, so a step reads each weight's one byte or half byte once;
// - more rows (prefill): a slice of output rows at a time dequantized into a BF16 scratch
//   (dequantize.cu, bounded by backend/dequantize_slices.h), then the BF16 cuBLAS GEMM of the slice
//   writes those columns of y. FP8 tensor-core GEMMs (cuBLASLt) are not used.
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

}  // namespace tpbatch
