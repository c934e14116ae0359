#pragma once
// The CUDA backend: Backend on device pointers (cuBLAS for matmul_nt, kernels/ for the rest),
// plus the device-memory helpers its callers need. Plain C++: no CUDA headers here.
// Built only with -DTPBATCH_CUDA=ON/AUTO (TPBATCH_HAVE_CUDA is then defined).
//
// Conventions of make_cuda_backend(): every float*/int32_t* argument of the Backend methods is a
// device pointer, except that paged_attention's `seqs` array and their `blocks` tables are host
// memory (scheduler metadata; the backend uploads them per call). Methods are asynchronous on the
// backend's stream; the copy helpers below are synchronous and wait for that work.
#include <cstddef>
#include <memory>
#include <string>

#include "backend/backend.h"

namespace tpbatch {

// Backend on CUDA device `device` (cudaSetDevice'd by the constructor). Throws Error on failure.
std::unique_ptr<Backend> make_cuda_backend(int device);

// Devices visible to this process; 0 when there is no driver or no device (never throws).
int cuda_device_count();
// "CUDA runtime 13.0, NCCL 2.27.7" (no GPU needed).
std::string cuda_build_info();

// Device memory. All throw Error with the CUDA error's text on failure.
void* cuda_alloc(size_t bytes);
void cuda_free(void* p) noexcept;
void cuda_copy_to_device(void* dst, const void* src, size_t bytes);
void cuda_copy_to_host(void* dst, const void* src, size_t bytes);
void cuda_copy_device(void* dst, const void* src, size_t bytes);
void cuda_memset(void* dst, int value, size_t bytes);
void cuda_synchronize();  // waits for all work on the current device

// Owning device array of T (moves only).
template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(size_t n) : p_(n ? static_cast<T*>(cuda_alloc(n * sizeof(T))) : nullptr), n_(n) {}
  DeviceArray(const T* host, size_t n) : DeviceArray(n) { cuda_copy_to_device(p_, host, n * sizeof(T)); }
  ~DeviceArray() { cuda_free(p_); }
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(n_, o.n_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* data() const { return p_; }
  size_t size() const { return n_; }
  void to_host(T* host) const { cuda_copy_to_host(host, p_, n_ * sizeof(T)); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace tpbatch
