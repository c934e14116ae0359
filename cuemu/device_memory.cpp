// Device and pinned host memory. Device memory is plain heap memory filled with 0xFF (NaN in
// every float type), so reading what nobody wrote shows up, and under AddressSanitizer poisoned
// past the requested size, so a kernel's out-of-bounds access is caught at the exact byte (real
// cudaMalloc rounds up to 256 bytes and would let it pass silently).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>

#include "host_state.h"
#include "sanitizers.h"

namespace cuemu {
namespace {

struct Alloc {
  size_t bytes;
  Mem kind;
};
std::map<uintptr_t, Alloc>& allocs() {
  static auto* m = new std::map<uintptr_t, Alloc>();  // never destroyed: stream workers may outlive main
  return *m;
}
size_t g_device_bytes = 0;
// Device memory is host memory here: CUEMU_MEMORY_MIB (default 1024) per device, not an H200's
// 141 GiB, so that a job sizing its KV cache from the free memory stays within the host's.
size_t total_memory() {
  static const size_t bytes = [] {
    const char* v = std::getenv("CUEMU_MEMORY_MIB");
    const long mib = v && *v ? std::atol(v) : 1024;
    return static_cast<size_t>(mib > 0 ? mib : 1024) << 20;
  }();
  return bytes;
}

const Alloc* find_alloc(const void* p, uintptr_t* base = nullptr) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = allocs().upper_bound(a);
  if (it == allocs().begin()) return nullptr;
  --it;
  if (a >= it->first + it->second.bytes && !(it->second.bytes == 0 && a == it->first)) return nullptr;
  if (base) *base = it->first;
  return &it->second;
}

}  // namespace

bool in_alloc_locked(const void* p, size_t bytes, Mem kind, std::string* why) {
  uintptr_t base = 0;
  const Alloc* a = find_alloc(p, &base);
  char buf[256];
  if (!a || a->kind != kind) {
    std::snprintf(buf, sizeof buf, "%p is not in any %s allocation", p, kind == Mem::Device ? "device" : "pinned");
    *why = buf;
    return false;
  }
  const uintptr_t off = reinterpret_cast<uintptr_t>(p) - base;
  if (off + bytes > a->bytes) {
    std::snprintf(buf, sizeof buf, "%zu bytes at offset %" PRIuPTR " run past the end of its %zu-byte allocation",
                  bytes, off, a->bytes);
    *why = buf;
    return false;
  }
  return true;
}
bool is_device_locked(const void* p) {
  const Alloc* a = find_alloc(p);
  return a && a->kind == Mem::Device;
}
bool is_pinned_locked(const void* p) {
  const Alloc* a = find_alloc(p);
  return a && a->kind == Mem::Pinned;
}
bool device_range(const void* p, size_t bytes, std::string* why) {
  Lock lk = lock_state();
  return in_alloc_locked(p, bytes, Mem::Device, why);
}

}  // namespace cuemu

using namespace cuemu;

extern "C" {

cudaError_t cudaMalloc(void** p, size_t bytes) {
  Lock lk = lock_state();
  if (!p) return set_error_locked(cudaErrorInvalidValue);
  if (g_device_bytes + bytes > total_memory()) return set_error_locked(cudaErrorMemoryAllocation);
  const size_t rounded = bytes ? (bytes + 255) / 256 * 256 : 256;  // cudaMalloc's 256-byte alignment
  void* m = std::aligned_alloc(256, rounded);
  if (!m) {
    complain("cudaMalloc(%zu): host allocation failed", bytes);
    return set_error_locked(cudaErrorMemoryAllocation);
  }
  std::memset(m, 0xFF, bytes);
#ifdef CUEMU_ASAN
  ASAN_POISON_MEMORY_REGION(static_cast<char*>(m) + bytes, rounded - bytes);
#endif
  allocs()[reinterpret_cast<uintptr_t>(m)] = Alloc{bytes, Mem::Device};
  g_device_bytes += bytes;
  *p = m;
  return cudaSuccess;
}

cudaError_t cudaFree(void* p) {
  Lock lk = lock_state();
  if (!p) return cudaSuccess;
  drain_all_locked(lk, "cudaFree");  // cudaFree synchronises the device
  auto it = allocs().find(reinterpret_cast<uintptr_t>(p));
  if (it == allocs().end() || it->second.kind != Mem::Device) {
    complain("cudaFree(%p): not the start of a live device allocation (double free, or a host pointer?)", p);
    return set_error_locked(cudaErrorInvalidValue);
  }
  g_device_bytes -= it->second.bytes;
#ifdef CUEMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, (it->second.bytes + 255) / 256 * 256);
#endif
  allocs().erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** p, size_t bytes) {
  Lock lk = lock_state();
  if (!p) return set_error_locked(cudaErrorInvalidValue);
  void* m = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096 + (bytes == 0 ? 4096 : 0));
  if (!m) return set_error_locked(cudaErrorMemoryAllocation);
  std::memset(m, 0xFF, bytes);
  allocs()[reinterpret_cast<uintptr_t>(m)] = Alloc{bytes, Mem::Pinned};
  *p = m;
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t bytes, unsigned int) { return cudaMallocHost(p, bytes); }

cudaError_t cudaFreeHost(void* p) {
  Lock lk = lock_state();
  if (!p) return cudaSuccess;
  drain_all_locked(lk, "cudaFreeHost");
  auto it = allocs().find(reinterpret_cast<uintptr_t>(p));
  if (it == allocs().end() || it->second.kind != Mem::Pinned) {
    complain("cudaFreeHost(%p): not a live pinned allocation", p);
    return set_error_locked(cudaErrorInvalidValue);
  }
  allocs().erase(it);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total) {
  Lock lk = lock_state();
  *free_bytes = total_memory() - g_device_bytes;
  *total = total_memory();
  return cudaSuccess;
}

}  // extern "C"
