// Gated activations: out[m,i] = act(gu[m,i]) * gu[m, inter+i], gu = [gate | up] per row; act =
// silu (SwiGLU) or gelu_tanh (Gemma's GeGLU). CPU twins: CpuBackend::silu_mul and
// CpuBackend::gelu_tanh_mul. Packs of 16 bytes when inter allows.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

struct Silu {
  __device__ __forceinline__ float operator()(float g, float u) const { return g / (1.0f + expf(-g)) * u; }
};
struct GeluTanh {  // HF's gelu_pytorch_tanh
  __device__ __forceinline__ float operator()(float g, float u) const {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * g * (1.0f + tanhf(k * (g + 0.044715f * g * g * g))) * u;
  }
};

template <typename T, typename Act>
__global__ void gated_kernel(const T* gu, T* out, int64_t m, int64_t inter) {
  const Act silu_times;
  const int64_t total = m * inter;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = t / inter, i = t % inter;
    out[t] = from_float<T>(silu_times(to_float(gu[r * 2 * inter + i]), to_float(gu[r * 2 * inter + inter + i])));
  }
}

// inter a multiple of the pack; t counts packs of the output.
template <typename T, typename Act>
__global__ void gated_packed_kernel(const T* gu, T* out, int64_t m, int64_t inter) {
  const Act silu_times;
  constexpr int N = Pack<T>::N;
  const int64_t per_row = inter / N, total = m * per_row;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = t / per_row, i = (t % per_row) * N;
    const Pack<T> g = load_pack(gu + r * 2 * inter + i), u = load_pack(gu + r * 2 * inter + inter + i);
    Pack<T> o;
#pragma unroll
    for (int e = 0; e < N; ++e) o.v[e] = from_float<T>(silu_times(to_float(g.v[e]), to_float(u.v[e])));
    store_pack(out + r * inter + i, o);
  }
}

template <typename Act>
void gated(BufferView gu, BufferView out, int64_t m, int64_t inter, cudaStream_t stream, const char* op) {
  const size_t total = static_cast<size_t>(m * inter);
  if (total == 0) return;
  if (gu.dtype != out.dtype) unsupported(op, "out (differs from gu)", out.dtype);
  dispatch_act(gu.dtype, op, "gu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (packable<T>(inter, gu.data, out.data))
      gated_packed_kernel<T, Act><<<grid_for(total / Pack<T>::N, 256), 256, 0, stream>>>(gu.as<T>(), out.as<T>(), m,
                                                                                         inter);
    else
      gated_kernel<T, Act><<<grid_for(total, 256), 256, 0, stream>>>(gu.as<T>(), out.as<T>(), m, inter);
  });
}

}  // namespace

void silu_mul(BufferView gu, BufferView out, int64_t m, int64_t inter, cudaStream_t stream) {
  gated<Silu>(gu, out, m, inter, stream, "silu_mul");
}

void gelu_tanh_mul(BufferView gu, BufferView out, int64_t m, int64_t inter, cudaStream_t stream) {
  gated<GeluTanh>(gu, out, m, inter, stream, "gelu_tanh_mul");
}

}  // namespace tpbatch::kernels
