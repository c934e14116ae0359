// Element-wise dtype conversion between F32, BF16 and F16 (round to nearest even), for the
// GEMM's operands when the weight and activation dtypes differ. CPU twins: bf16_to_f32,
// f32_to_bf16, f16_to_f32, f32_to_f16 (backend/dtype.h), which round the same way.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

template <typename From, typename To>
__global__ void convert_kernel(const From* in, To* out, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    out[i] = from_float<To>(to_float(in[i]));
}

}  // namespace

void convert(BufferView in, BufferView out, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  dispatch_weight(in.dtype, "convert", "input", [&](auto from) {
    dispatch_weight(out.dtype, "convert", "output", [&](auto to) {
      using From = typename decltype(from)::type;
      using To = typename decltype(to)::type;
      convert_kernel<From, To><<<grid_for(count, 256), 256, 0, stream>>>(in.as<From>(), out.as<To>(), count);
    });
  });
}

}  // namespace tpbatch::kernels
