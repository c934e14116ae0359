// RMSNorm, one thread block per row: out = x * rsqrt(mean(x^2) + eps) * w.
// CPU twin: CpuBackend::rmsnorm (which accumulates in double; fp32 here is within 1e-6).
// add_rmsnorm fuses the residual add that precedes every norm in the layer: x += residual first.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kThreads = 256;

template <typename W, bool kAddResidual>
__global__ void rmsnorm_kernel(float* x, const float* residual, const W* w, float* out, int64_t n, float eps) {
  float* xr = x + blockIdx.x * n;
  float ss = 0.0f;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
    float v = xr[j];
    if (kAddResidual) xr[j] = v = v + residual[blockIdx.x * n + j];
    ss += v * v;
  }
  ss = block_sum(ss);
  const float scale = rsqrtf(ss / static_cast<float>(n) + eps);
  float* o = out + blockIdx.x * n;
  for (int64_t j = threadIdx.x; j < n; j += blockDim.x) o[j] = xr[j] * scale * to_float(w[j]);
}

}  // namespace

template <typename W>
void rmsnorm(const float* x, const W* w, float* out, int64_t m, int64_t n, float eps, cudaStream_t stream) {
  if (m == 0) return;
  rmsnorm_kernel<W, false><<<m, kThreads, 0, stream>>>(const_cast<float*>(x), nullptr, w, out, n, eps);
}

template <typename W>
void add_rmsnorm(float* x, const float* residual, const W* w, float* out, int64_t m, int64_t n, float eps,
                 cudaStream_t stream) {
  if (m == 0) return;
  rmsnorm_kernel<W, true><<<m, kThreads, 0, stream>>>(x, residual, w, out, n, eps);
}

#define INSTANTIATE(W)                                                                                   \
  template void rmsnorm<W>(const float*, const W*, float*, int64_t, int64_t, float, cudaStream_t);       \
  template void add_rmsnorm<W>(float*, const float*, const W*, float*, int64_t, int64_t, float, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(__nv_bfloat16)
INSTANTIATE(__half)
#undef INSTANTIATE

}  // namespace tpbatch::kernels
