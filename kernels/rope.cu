// Rotate-half RoPE in place, one thread block per row of the step: for head h and i < head_dim/2,
// with angle = position[r] * inv_freq[i]: (a, b) = (v[i], v[i+half]) -> (a cos - b sin, b cos + a sin).
// CPU twin: CpuBackend::rope. The angle and its sine/cosine are computed in double as there
// (cheap: one sincos per (row, i), shared by the heads), so long positions match too. Positions
// come from the step (begin_step), and which of inv_freq's tables a row uses (rope_tables, null:
// the first); inv_freq is F32.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

template <typename T>
__global__ void rope_kernel(T* x, int64_t row_stride, int64_t heads, int64_t head_dim, const int32_t* positions,
                            const int32_t* rope_tables, const float* inv_freq) {
  extern __shared__ float cs_sn[];  // [half] cos, then [half] sin
  const int64_t r = blockIdx.x, half = head_dim / 2;
  if (rope_tables) inv_freq += rope_tables[r] * half;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
    double s, c;
    sincos(static_cast<double>(positions[r]) * inv_freq[i], &s, &c);
    cs_sn[i] = static_cast<float>(c);
    cs_sn[half + i] = static_cast<float>(s);
  }
  __syncthreads();
  for (int64_t t = threadIdx.x; t < heads * half; t += blockDim.x) {
    const int64_t h = t / half, i = t % half;
    T* v = x + r * row_stride + h * head_dim;
    const float a = to_float(v[i]), b = to_float(v[i + half]), c = cs_sn[i], s = cs_sn[half + i];
    v[i] = from_float<T>(a * c - b * s);
    v[i + half] = from_float<T>(b * c + a * s);
  }
}

}  // namespace

void rope(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView inv_freq,
          const StepView& step, cudaStream_t stream) {
  if (rows == 0 || heads == 0) return;
  if (inv_freq.dtype != DType::F32) unsupported("rope", "inv_freq", inv_freq.dtype);
  dispatch_act(x.dtype, "rope", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rope_kernel<T><<<rows, 128, head_dim / 2 * 2 * sizeof(float), stream>>>(x.as<T>(), row_stride, heads, head_dim,
                                                                             step.positions, step.rope_tables,
                                                                             inv_freq.as<float>());
  });
}

}  // namespace tpbatch::kernels
