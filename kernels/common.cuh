#pragma once
// Small device helpers shared by the kernels: element conversions to and from fp32, 16-byte packs
// for vectorised loads, block reductions, and the host-side dispatch from a DType to a C++ type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <string>

#include "backend/dtype.h"
#include "common/error.h"

namespace tpbatch::kernels {

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }

// 16 bytes of T: what one vectorised load or store moves (8 bf16, or 4 floats).
template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};
template <typename T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}
template <typename T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& pk) {
  *reinterpret_cast<Pack<T>*>(p) = pk;
}
// Whether every pointer is 16-byte aligned and `n` a whole number of packs: the vectorised path.
template <typename T>
inline bool packable(int64_t n, const void* a, const void* b = nullptr, const void* c = nullptr) {
  auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return n % Pack<T>::N == 0 && al(a) && al(b) && al(c);
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ int warp_sum(int v) {  // exact: integer sums do not depend on their order
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum / max over the whole block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();  // part[] may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < warps ? part[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < warps ? part[lane] : -INFINITY;
  return warp_max(v);
}

inline unsigned blocks_for(size_t n, unsigned threads) { return static_cast<unsigned>((n + threads - 1) / threads); }
// A grid-stride launch: enough blocks to cover n, at most 65536 (the kernels loop over the rest).
inline unsigned grid_for(size_t n, unsigned threads) {
  const unsigned b = blocks_for(n, threads);
  return b < 65536u ? (b ? b : 1u) : 65536u;
}

// ---- host-side dispatch from a buffer's DType to the element type ----------------------------
template <typename T>
struct Tag {
  using type = T;
};

[[noreturn]] inline void unsupported(const char* op, const char* what, DType t) {
  throw Error(std::string("CUDA backend: ") + op + ": " + what + " of dtype " + dtype_name(t) + " is not supported");
}

// Activations: F32 or BF16.
template <typename F>
void dispatch_act(DType t, const char* op, const char* what, F&& f) {
  switch (t) {
    case DType::F32: f(Tag<float>{}); return;
    case DType::BF16: f(Tag<__nv_bfloat16>{}); return;
    default: unsupported(op, what, t);
  }
}
// Weights / tables: F32, BF16 or F16.
template <typename F>
void dispatch_weight(DType t, const char* op, const char* what, F&& f) {
  switch (t) {
    case DType::F32: f(Tag<float>{}); return;
    case DType::BF16: f(Tag<__nv_bfloat16>{}); return;
    case DType::F16: f(Tag<__half>{}); return;
    default: unsupported(op, what, t);
  }
}

}  // namespace tpbatch::kernels
