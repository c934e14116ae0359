#pragma once
// What a kernel translation unit sees on the emulated device: force-included (-include) into every
// kernels/*.cu after cu2cpp.cmake rewrote its launches. Each CUDA thread is a fiber; a block's
// fibers run on one OS thread; __syncthreads and the warp intrinsics are real rendezvous that check
// CUDA's rules (every live thread, every lane of the mask, the same operation across the mask) and
// stop the process with a diagnosis otherwise. bf16/fp16 conversions are NVIDIA's own host code
// from the CUDA headers.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __constant__
#define __global__
#define __device__
#define __host__
#define __constant__ const
// One block runs at a time on an OS thread, so a function-local `static thread_local` is exactly
// one copy per running block. Dynamic shared memory: cuemu::dynamic_shared (see cu2cpp.cmake).
#define __shared__ static thread_local
#define __launch_bounds__(...)
#ifndef __restrict__
#define __restrict__ __restrict
#endif

namespace cuemu {

// Trivially constructible on purpose: a thread_local with a constructor is reached through a
// wrapper function, which UBSan's checks then see returning null under the fibers.
struct BlockState {
  uint3 idx, dim, grid;
  void* dyn_smem;
};
extern thread_local const uint3* cur_thread_idx;
extern thread_local BlockState cur_block;

void syncthreads();
enum class Shfl { Idx, Up, Down, Xor };
uint64_t warp_exchange(unsigned mask, int kind, uint64_t bits, int arg, int width);
inline constexpr int kBallot = 4, kSyncwarp = 5;  // warp_exchange kinds beside the Shfl ones
void* dynamic_shared_raw();
template <class T>
T* dynamic_shared() {
  return static_cast<T*>(dynamic_shared_raw());
}

// ---- launches: K ^ launch_config(grid, block, smem, stream)(args...) ---------------------------
struct Config {
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  const char* file;
  int line;
  template <class... A>
  auto operator()(A&&... a) const;
};
template <class... A>
struct Bound {
  Config cfg;
  std::tuple<A...> args;
};
template <class... A>
auto Config::operator()(A&&... a) const {
  return Bound<std::decay_t<A>...>{*this, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
}
inline Config launch_config(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = nullptr,
                            const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return Config{grid, block, smem, stream, file, line};
}
// Validates the configuration (a bad one sets the sticky launch error, as the runtime does), then
// queues the grid on the stream. `body` runs one CUDA thread on its own copies of the arguments.
void submit(const Config& cfg, std::function<void()> body);

template <class... P, class... A>
void operator^(void (*kernel)(P...), Bound<A...>&& b) {
  static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
  using Params = std::tuple<std::decay_t<P>...>;
  Params params = std::apply([](auto&&... a) { return Params(std::forward<decltype(a)>(a)...); }, std::move(b.args));
  submit(b.cfg, [kernel, params]() { std::apply(kernel, params); });
}

namespace detail {
template <class T>
T shuffle(unsigned mask, T v, Shfl op, int arg, int width) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>, "shuffle of a type over 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = warp_exchange(mask, static_cast<int>(op), bits, arg, width);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}
}  // namespace detail

}  // namespace cuemu

#define threadIdx (*::cuemu::cur_thread_idx)
#define blockIdx (::cuemu::cur_block.idx)
#define blockDim (::cuemu::cur_block.dim)
#define gridDim (::cuemu::cur_block.grid)
inline constexpr int warpSize = 32;

// ---- intrinsics ------------------------------------------------------------------------------
inline void __syncthreads() { ::cuemu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cuemu::warp_exchange(mask, ::cuemu::kSyncwarp, 0, 0, 32); }
template <class T>
T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::cuemu::detail::shuffle(mask, v, ::cuemu::Shfl::Idx, src, width);
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
  return ::cuemu::detail::shuffle(mask, v, ::cuemu::Shfl::Up, static_cast<int>(d), width);
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
  return ::cuemu::detail::shuffle(mask, v, ::cuemu::Shfl::Down, static_cast<int>(d), width);
}
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::cuemu::detail::shuffle(mask, v, ::cuemu::Shfl::Xor, lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int pred) {
  return static_cast<unsigned>(::cuemu::warp_exchange(mask, ::cuemu::kBallot, pred != 0, 0, 32));
}
inline int __all_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) == mask; }
inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }

inline float __int_as_float(int v) { float f; std::memcpy(&f, &v, 4); return f; }
inline int __float_as_int(float v) { int i; std::memcpy(&i, &v, 4); return i; }
inline unsigned __float_as_uint(float v) { unsigned i; std::memcpy(&i, &v, 4); return i; }
inline float __uint_as_float(unsigned v) { float f; std::memcpy(&f, &v, 4); return f; }
// The sum of the four signed byte products of a and b, plus c.
inline int __dp4a(int a, int b, int c) {
  for (int i = 0; i < 4; ++i) c += int(int8_t(a >> (8 * i))) * int(int8_t(b >> (8 * i)));
  return c;
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
template <class T>
T __ldg(const T* p) {
  return *p;
}
// CUDA's min/max are overloads over the usual arithmetic conversions.
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <class A, class B, class = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>>>
constexpr std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}
