// SwiGLU activation: out[m,i] = silu(gu[m,i]) * gu[m, inter+i], gu = [gate | up] per row.
// CPU twin: CpuBackend::silu_mul.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

__global__ void silu_mul_kernel(const float* gu, float* out, int64_t m, int64_t inter) {
  const int64_t total = m * inter;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = t / inter, i = t % inter;
    const float g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
    out[t] = g / (1.0f + expf(-g)) * u;
  }
}

}  // namespace

void silu_mul(const float* gu, float* out, int64_t m, int64_t inter, cudaStream_t stream) {
  const size_t total = static_cast<size_t>(m * inter);
  if (total == 0) return;
  silu_mul_kernel<<<blocks_for(total, 256) < 65536 ? blocks_for(total, 256) : 65536, 256, 0, stream>>>(gu, out, m, inter);
}

}  // namespace tpbatch::kernels
