// Element-wise ops on activations (F32 or BF16), 16-byte packs for add when the sizes allow.
// CPU twins: CpuBackend::add (x[i] += y[i]), CpuBackend::add_bias (x[m,n] += bias[n], bias F32),
// CpuBackend::scale (x[i] *= factor) and CpuBackend::softcap (x[i] = cap * tanh(x[i] / cap)).
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr unsigned kThreads = 256;

template <typename T>
__global__ void add_kernel(T* x, const T* y, size_t count) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) + to_float(y[i]));
}

// count a multiple of the pack; i counts packs.
template <typename T>
__global__ void add_packed_kernel(T* x, const T* y, size_t packs) {
  constexpr int N = Pack<T>::N;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < packs; i += size_t(gridDim.x) * blockDim.x) {
    Pack<T> a = load_pack(x + i * N);
    const Pack<T> b = load_pack(y + i * N);
#pragma unroll
    for (int e = 0; e < N; ++e) a.v[e] = from_float<T>(to_float(a.v[e]) + to_float(b.v[e]));
    store_pack(x + i * N, a);
  }
}

template <typename T>
__global__ void add_bias_kernel(T* x, const float* bias, size_t count, int64_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) + bias[i % n]);
}

template <typename T>
__global__ void scale_kernel(T* x, size_t count, float factor) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(to_float(x[i]) * factor);
}

template <typename T>
__global__ void softcap_kernel(T* x, size_t count, float cap) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x)
    x[i] = from_float<T>(cap * tanhf(to_float(x[i]) / cap));
}

}  // namespace

void scale(BufferView x, size_t count, float factor, cudaStream_t stream) {
  if (count == 0) return;
  dispatch_act(x.dtype, "scale", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scale_kernel<T><<<grid_for(count, kThreads), kThreads, 0, stream>>>(x.as<T>(), count, factor);
  });
}

void softcap(BufferView x, size_t count, float cap, cudaStream_t stream) {
  if (count == 0) return;
  dispatch_act(x.dtype, "softcap", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softcap_kernel<T><<<grid_for(count, kThreads), kThreads, 0, stream>>>(x.as<T>(), count, cap);
  });
}

void add(BufferView x, BufferView y, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  if (x.dtype != y.dtype) unsupported("add", "y (differs from x)", y.dtype);
  dispatch_act(x.dtype, "add", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (packable<T>(static_cast<int64_t>(count), x.data, y.data)) {
      const size_t packs = count / Pack<T>::N;
      add_packed_kernel<T><<<grid_for(packs, kThreads), kThreads, 0, stream>>>(x.as<T>(), y.as<T>(), packs);
    } else {
      add_kernel<T><<<grid_for(count, kThreads), kThreads, 0, stream>>>(x.as<T>(), y.as<T>(), count);
    }
  });
}

void add_bias(BufferView x, BufferView bias, int64_t m, int64_t n, cudaStream_t stream) {
  const size_t count = static_cast<size_t>(m * n);
  if (count == 0) return;
  if (bias.dtype != DType::F32) unsupported("add_bias", "bias", bias.dtype);
  dispatch_act(x.dtype, "add_bias", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_bias_kernel<T><<<grid_for(count, kThreads), kThreads, 0, stream>>>(x.as<T>(), bias.as<float>(), count, n);
  });
}

}  // namespace tpbatch::kernels
