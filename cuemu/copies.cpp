// Copies and fills, with the direction and the bounds checked against the allocation table (real
// CUDA would copy garbage or fault later). Pinned host memory is read and written only when the
// copy runs on its stream, so a host that reuses a pinned buffer before the copy is done sees the
// wrong data; pageable memory follows CUDA's rules: a pageable source is staged before the call
// returns, a copy into pageable memory returns only when done.
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "host_state.h"

namespace cuemu {
namespace {

cudaError_t copy_locked(Lock& lk, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s,
                        const char* api) {
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!stream) return set_error_locked(err);
  if (bytes == 0) return cudaSuccess;
  if (kind == cudaMemcpyDefault)
    kind = is_device_locked(dst) ? (is_device_locked(src) ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                                 : (is_device_locked(src) ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
  const bool dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  std::string why;
  if (dst_dev ? !in_alloc_locked(dst, bytes, Mem::Device, &why) : is_device_locked(dst)) {
    complain("%s: destination %s", api, dst_dev ? why.c_str() : "is device memory but the kind says host");
    return set_error_locked(cudaErrorInvalidValue);
  }
  if (src_dev ? !in_alloc_locked(src, bytes, Mem::Device, &why) : is_device_locked(src)) {
    complain("%s: source %s", api, src_dev ? why.c_str() : "is device memory but the kind says host");
    return set_error_locked(cudaErrorInvalidValue);
  }
  char what[128];
  std::snprintf(what, sizeof what, "%s %zu bytes", api, bytes);
  if (kind == cudaMemcpyHostToDevice && !is_pinned_locked(src)) {
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(src),
                                                      static_cast<const char*>(src) + bytes);
    enqueue_locked(lk, stream, what, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
    return cudaSuccess;
  }
  enqueue_locked(lk, stream, what, [dst, src, bytes] { std::memcpy(dst, src, bytes); });
  if (kind == cudaMemcpyDeviceToHost && !is_pinned_locked(dst)) drain_locked(lk, stream, api);
  return cudaSuccess;
}

}  // namespace
}  // namespace cuemu

using namespace cuemu;

extern "C" {

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
  Lock lk = lock_state();
  return copy_locked(lk, dst, src, bytes, kind, s, "cudaMemcpyAsync");
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, enum cudaMemcpyKind kind) {
  Lock lk = lock_state();
  const cudaError_t e = copy_locked(lk, dst, src, bytes, kind, nullptr, "cudaMemcpy");
  cudaError_t err = cudaSuccess;
  drain_locked(lk, stream_of_locked(nullptr, &err), "cudaMemcpy");  // synchronous for the host
  return e;
}

cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t s) {
  Lock lk = lock_state();
  if (width > dpitch || width > spitch) {
    complain("cudaMemcpy2DAsync: width %zu above a pitch (%zu, %zu)", width, dpitch, spitch);
    return set_error_locked(cudaErrorInvalidPitchValue);
  }
  if (height == 0 || width == 0) return cudaSuccess;
  if (kind != cudaMemcpyDeviceToDevice) {
    complain("cudaMemcpy2DAsync: only device-to-device copies are emulated");
    return set_error_locked(cudaErrorInvalidValue);
  }
  const size_t dspan = dpitch * (height - 1) + width, sspan = spitch * (height - 1) + width;
  std::string why;
  if (!in_alloc_locked(dst, dspan, Mem::Device, &why) || !in_alloc_locked(src, sspan, Mem::Device, &why)) {
    complain("cudaMemcpy2DAsync: %s", why.c_str());
    return set_error_locked(cudaErrorInvalidValue);
  }
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!stream) return set_error_locked(err);
  enqueue_locked(lk, stream, "cudaMemcpy2DAsync", [=] {
    for (size_t r = 0; r < height; ++r)
      std::memmove(static_cast<char*>(dst) + r * dpitch, static_cast<const char*>(src) + r * spitch, width);
  });
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t s) {
  Lock lk = lock_state();
  std::string why;
  if (bytes && !in_alloc_locked(p, bytes, Mem::Device, &why)) {
    complain("cudaMemsetAsync: %s", why.c_str());
    return set_error_locked(cudaErrorInvalidValue);
  }
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!stream) return set_error_locked(err);
  enqueue_locked(lk, stream, "cudaMemsetAsync", [=] { std::memset(p, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* p, int value, size_t bytes) {
  const cudaError_t e = cudaMemsetAsync(p, value, bytes, nullptr);
  cudaDeviceSynchronize();
  return e;
}

}  // extern "C"
