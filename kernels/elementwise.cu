// Element-wise adds. CPU twins: CpuBackend::add (x[i] += y[i]) and CpuBackend::add_bias
// (x[m,n] += bias[n]).
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr unsigned kThreads = 256, kMaxBlocks = 65536;

__global__ void add_kernel(float* x, const float* y, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__global__ void add_bias_kernel(float* x, const float* bias, size_t count, int64_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    x[i] += bias[i % n];
}

unsigned grid(size_t count) { return blocks_for(count, kThreads) < kMaxBlocks ? blocks_for(count, kThreads) : kMaxBlocks; }

}  // namespace

void add(float* x, const float* y, size_t count, cudaStream_t stream) {
  if (count) add_kernel<<<grid(count), kThreads, 0, stream>>>(x, y, count);
}

void add_bias(float* x, const float* bias, int64_t m, int64_t n, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(m * n);
  if (count) add_bias_kernel<<<grid(count), kThreads, 0, stream>>>(x, bias, count, n);
}

}  // namespace tpbatch::kernels
