// Weight upload conversions: bf16/fp16 <-> fp32, element by element, round to nearest even.
// CPU twin: the safetensors loader's bf16/fp16 -> fp32 widening (exact), and rounding on the way back.
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

template <typename From, typename To>
void convert(const From* in, To* out, size_t count, cudaStream_t stream) {
  if (!count) return;
  const unsigned blocks = blocks_for(count, 256) < 65536 ? blocks_for(count, 256) : 65536;
  convert_kernel<From, To><<<blocks, 256, 0, stream>>>(in, out, count);
}

template void convert<__nv_bfloat16, float>(const __nv_bfloat16*, float*, size_t, cudaStream_t);
template void convert<__half, float>(const __half*, float*, size_t, cudaStream_t);
template void convert<float, __nv_bfloat16>(const float*, __nv_bfloat16*, size_t, cudaStream_t);
template void convert<float, __half>(const float*, __half*, size_t, cudaStream_t);

}  // namespace tpbatch::kernels
