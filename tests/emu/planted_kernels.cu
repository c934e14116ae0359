#include "planted_kernels.h"

namespace planted {
namespace {

constexpr int kBlock = 256;

template <bool kBarrier>
__global__ void reverse_twice_kernel(const float* in, float* out) {
  __shared__ float buf[kBlock];
  const int t = threadIdx.x, base = blockIdx.x * kBlock;
  buf[t] = in[base + t];
  __syncthreads();
  const float mirrored = buf[kBlock - 1 - t];
  if (kBarrier) __syncthreads();
  buf[t] = 2.0f * mirrored;
  __syncthreads();
  out[base + t] = buf[kBlock - 1 - t];
}

template <bool kOnePast>
__global__ void shared_sum_kernel(const float* in, float* out, int n) {
  extern __shared__ float vals[];
  for (int i = threadIdx.x; kOnePast ? i <= n : i < n; i += blockDim.x) vals[i] = i < n ? in[i] : 0.0f;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += vals[i];
    out[0] = s;
  }
}

__global__ void warp_sum_kernel(const float* in, float* out) {
  __shared__ float part[32];
  float v = in[threadIdx.x];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.0f;
    for (unsigned w = 0; w < (blockDim.x + 31) / 32; ++w) s += part[w];
    out[0] = s;
  }
}

}  // namespace

void reverse_twice(const float* in, float* out, int blocks, bool barrier_before_reuse, cudaStream_t stream) {
  if (barrier_before_reuse) reverse_twice_kernel<true><<<blocks, kBlock, 0, stream>>>(in, out);
  else reverse_twice_kernel<false><<<blocks, kBlock, 0, stream>>>(in, out);
}

void shared_sum(const float* in, float* out, int n, bool load_one_past, cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(n) * sizeof(float);
  if (load_one_past) shared_sum_kernel<true><<<1, 64, smem, stream>>>(in, out, n);
  else shared_sum_kernel<false><<<1, 64, smem, stream>>>(in, out, n);
}

void warp_sum(const float* in, float* out, int threads, cudaStream_t stream) {
  warp_sum_kernel<<<1, threads, 0, stream>>>(in, out);
}

}  // namespace planted
