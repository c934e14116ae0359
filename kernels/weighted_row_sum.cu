// Mixture of experts: each token's k expert outputs, weighted by the router and summed in F32 in
// a fixed order (no atomics), one thread block per output row. CPU twin: cpu::weighted_row_sum.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

template <typename T>
__global__ void weighted_row_sum_kernel(const T* src, const int32_t* rows, const float* weights, int64_t k,
                                        int64_t width, T* out) {
  const int64_t i = blockIdx.x;
  for (int64_t c = threadIdx.x; c < width; c += blockDim.x) {
    float acc = 0.0f;
    for (int64_t j = 0; j < k; ++j) acc += weights[i * k + j] * to_float(src[int64_t(rows[i * k + j]) * width + c]);
    out[i * width + c] = from_float<T>(acc);
  }
}

}  // namespace

void weighted_row_sum(BufferView src, const int32_t* rows, const float* weights, int64_t m, int64_t k, int64_t width,
                      BufferView out, cudaStream_t stream) {
  if (m == 0 || width == 0) return;
  if (src.dtype != out.dtype) unsupported("weighted_row_sum", "out (differs from src)", out.dtype);
  dispatch_act(src.dtype, "weighted_row_sum", "src", [&](auto tag) {
    using T = typename decltype(tag)::type;
    weighted_row_sum_kernel<T><<<static_cast<unsigned>(m), 256, 0, stream>>>(src.as<T>(), rows, weights, k, width,
                                                                             out.as<T>());
  });
}

}  // namespace tpbatch::kernels
