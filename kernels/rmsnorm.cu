// RMSNorm, one thread block per row: out = x * rsqrt(mean(x^2) + eps) * w (x, out activations;
// w F32, or BF16/F16). CPU twins: CpuBackend::rmsnorm, CpuBackend::add_rmsnorm and
// CpuBackend::rmsnorm_heads (one warp per head of a row; all accumulate in double; fp32 here). add_rmsnorm fuses the residual add that precedes every norm
// in the layer: x += residual first, stored in x's dtype, and the norm is of the stored values,
// as the unfused add + rmsnorm would compute it. Rows go by 16-byte packs when n allows.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kThreads = 256;

template <typename T, typename W, bool kAddResidual>
__global__ void rmsnorm_kernel(T* x, const T* residual, const W* w, T* out, int64_t n, float eps, bool packed) {
  T* xr = x + blockIdx.x * n;
  const T* rr = kAddResidual ? residual + blockIdx.x * n : nullptr;
  T* o = out + blockIdx.x * n;
  constexpr int N = Pack<T>::N;
  float ss = 0.0f;
  if (packed) {
    for (int64_t j = threadIdx.x * int64_t(N); j < n; j += int64_t(blockDim.x) * N) {
      Pack<T> a = load_pack(xr + j);
      if (kAddResidual) {
        const Pack<T> b = load_pack(rr + j);
#pragma unroll
        for (int e = 0; e < N; ++e) a.v[e] = from_float<T>(to_float(a.v[e]) + to_float(b.v[e]));
        store_pack(xr + j, a);
      }
#pragma unroll
      for (int e = 0; e < N; ++e) ss += to_float(a.v[e]) * to_float(a.v[e]);
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      T v = xr[j];
      if (kAddResidual) xr[j] = v = from_float<T>(to_float(v) + to_float(rr[j]));
      ss += to_float(v) * to_float(v);
    }
  }
  ss = block_sum(ss);  // its barriers also order this thread's x writes before the reads below
  const float scale = rsqrtf(ss / static_cast<float>(n) + eps);
  if (packed) {
    for (int64_t j = threadIdx.x * int64_t(N); j < n; j += int64_t(blockDim.x) * N) {
      // Each thread reads back exactly the packs it wrote above: no cross-thread dependency.
      const Pack<T> a = load_pack(xr + j);
      Pack<T> r;
#pragma unroll
      for (int e = 0; e < N; ++e) r.v[e] = from_float<T>(to_float(a.v[e]) * scale * to_float(w[j + e]));
      store_pack(o + j, r);
    }
  } else {
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) o[j] = from_float<T>(to_float(xr[j]) * scale * to_float(w[j]));
  }
}

template <bool kAddResidual>
void launch(BufferView x, BufferView residual, BufferView w, BufferView out, int64_t m, int64_t n, float eps,
            cudaStream_t stream, const char* op) {
  if (m == 0 || n == 0) return;
  if (out.dtype != x.dtype) unsupported(op, "out (differs from x)", out.dtype);
  if (kAddResidual && residual.dtype != x.dtype) unsupported(op, "residual (differs from x)", residual.dtype);
  dispatch_act(x.dtype, op, "x", [&](auto xt) {
    dispatch_weight(w.dtype, op, "w", [&](auto wt) {
      using T = typename decltype(xt)::type;
      using W = typename decltype(wt)::type;
      const bool packed = packable<T>(n, x.data, out.data, kAddResidual ? residual.data : nullptr);
      rmsnorm_kernel<T, W, kAddResidual><<<m, kThreads, 0, stream>>>(
          x.as<T>(), kAddResidual ? residual.as<T>() : nullptr, w.as<W>(), out.as<T>(), n, eps, packed);
    });
  });
}

// One warp per (row, head): the head's sum of squares by warp shuffles, then scaled in place.
template <typename T>
__global__ void rmsnorm_heads_kernel(T* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t hd,
                                     const float* w, float eps) {
  const int64_t item = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (item >= rows * heads) return;  // whole warps leave together
  T* v = x + (item / heads) * row_stride + (item % heads) * hd;
  float ss = 0.0f;
  for (int64_t d = lane; d < hd; d += 32) ss += to_float(v[d]) * to_float(v[d]);
  ss = warp_sum(ss);
  const float s = rsqrtf(ss / static_cast<float>(hd) + eps);
  for (int64_t d = lane; d < hd; d += 32) v[d] = from_float<T>(to_float(v[d]) * s * w[d]);
}

}  // namespace

void rmsnorm_heads(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView w,
                   float eps, cudaStream_t stream) {
  if (rows == 0 || heads == 0 || head_dim == 0) return;
  if (w.dtype != DType::F32) unsupported("rmsnorm_heads", "w", w.dtype);
  dispatch_act(x.dtype, "rmsnorm_heads", "x", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const size_t threads = static_cast<size_t>(rows * heads) * 32;
    rmsnorm_heads_kernel<T><<<blocks_for(threads, 256), 256, 0, stream>>>(x.as<T>(), rows, row_stride, heads,
                                                                          head_dim, w.as<float>(), eps);
  });
}

void rmsnorm(BufferView x, BufferView w, BufferView out, int64_t m, int64_t n, float eps, cudaStream_t stream) {
  launch<false>(x, BufferView{}, w, out, m, n, eps, stream, "rmsnorm");
}

void add_rmsnorm(BufferView x, BufferView residual, BufferView w, BufferView out, int64_t m, int64_t n, float eps,
                 cudaStream_t stream) {
  launch<true>(x, residual, w, out, m, n, eps, stream, "add_rmsnorm");
}

}  // namespace tpbatch::kernels
