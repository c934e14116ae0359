// y[m,n] = x[m,k] · wᵀ for a few rows of x (decode) with quantized weights dequantized in
// registers: each weight is read once, as its one byte (fp8) or half byte (I4), never written out
// as BF16. One warp per output row; lanes stride over k, accumulate in fp32 and sum by shuffles.
// CPU twin: quant_rows_m1 (src/backend/cpu/gemm/quant_rows_m1.h), which does the same for one row
// of x; both use the fp32 value quantized_weight.cuh defines.
#include "kernels.h"
#include "quantized_weight.cuh"

namespace tpbatch::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <bool kInt4, typename X, typename Y>
__global__ void quantized_gemv_kernel(const X* x, QuantGrid g, Y* y, int64_t m, int64_t n, int64_t k) {
  const int64_t row = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;  // the whole warp: row is the warp's
  float acc[kQuantizedGemvMaxRows] = {};
  for (int64_t c = lane; c < k; c += 32) {
    const float w = dequantized<kInt4>(g, row, c);
#pragma unroll
    for (int i = 0; i < kQuantizedGemvMaxRows; ++i)
      if (i < m) acc[i] += to_float(x[i * k + c]) * w;
  }
#pragma unroll
  for (int i = 0; i < kQuantizedGemvMaxRows; ++i) {
    if (i >= m) break;
    const float sum = warp_sum(acc[i]);
    if (lane == 0) y[i * n + row] = from_float<Y>(sum);
  }
}

}  // namespace

void quantized_gemv(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n, int64_t k,
                    cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  if (m > kQuantizedGemvMaxRows)
    throw Error("CUDA backend: quantized_gemv: " + std::to_string(m) + " rows of x, more than " +
                std::to_string(kQuantizedGemvMaxRows));
  const QuantGrid g = quant_grid(w, k, "quantized_gemv");
  const unsigned blocks = blocks_for(size_t(n), kWarpsPerBlock);
  dispatch_act(x.dtype, "quantized_gemv", "x", [&](auto xt) {
    dispatch_act(y.dtype, "quantized_gemv", "y", [&](auto yt) {
      using X = typename decltype(xt)::type;
      using Y = typename decltype(yt)::type;
      if (g.int4)
        quantized_gemv_kernel<true, X, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(x.as<X>(), g, y.as<Y>(), m, n, k);
      else
        quantized_gemv_kernel<false, X, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(x.as<X>(), g, y.as<Y>(), m, n, k);
    });
  });
}

}  // namespace tpbatch::kernels
