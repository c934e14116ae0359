#include "backend/cpu/host_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.h"

namespace tpbatch {
namespace {

// The kernel's page size (4 KiB on x86-64, 4 to 64 KiB on aarch64): what mmap, munmap and
// mprotect round to.
const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));
constexpr size_t kMmapFrom = 1u << 20;        // plain mode: at least this many bytes come from mmap
constexpr size_t kHugePage = 2u << 20;        // x86-64's transparent huge page
constexpr size_t kCheckedReserve = size_t(1) << 40;  // address space only (MAP_NORESERVE)

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

[[noreturn]] void cannot_allocate(size_t bytes) {
  throw Error("CPU backend: cannot allocate " + std::to_string(bytes) + " bytes");
}

// len bytes (a multiple of kPage) on a 2 MiB boundary, asking for transparent huge pages (where
// THP is "madvise", Debian's default, anonymous memory gets them only when asked). A decode step
// streams every weight once, and the hardware prefetchers stop at each 4 KiB page's end: on a Zen
// 3 (tpbatch_gemm_bench --rows 1 --path row-blocked --threads 1) huge pages took one step of bf16
// linear layers from 12.7-13.6 to 10.8-11.2 ms, fp32 from 24-28 to 23-25. The mapping is cut to
// exactly [p, p + len), so release unmaps it as any other; without THP the advice is ignored.
void* map_huge(size_t len) {
  void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) cannot_allocate(len);
  const auto start = reinterpret_cast<uintptr_t>(raw), at = round_up(start, kHugePage);
  if (at > start) munmap(raw, at - start);
  if (at - start < kHugePage) munmap(reinterpret_cast<void*>(at + len), kHugePage - (at - start));
  void* p = reinterpret_cast<void*>(at);
#if defined(MADV_HUGEPAGE)
  madvise(p, len, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace

HostMemory::HostMemory(bool checked) : checked_(checked) {
  if (!checked_) return;
  for (size_t want = kCheckedReserve; want >= (size_t(1) << 32); want /= 2) {
    void* p = mmap(nullptr, want, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      base_ = static_cast<char*>(p);
      reserved_ = want;
      return;
    }
  }
  throw Error("checked CPU backend: cannot reserve address space for backend memory");
}

HostMemory::~HostMemory() {
  if (base_) munmap(base_, reserved_);
}

void* HostMemory::allocate(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (!checked_) {
    if (bytes >= kHugePage) return map_huge(round_up(bytes, kPage));
    if (bytes >= kMmapFrom) {
      void* p = mmap(nullptr, round_up(bytes, kPage), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) cannot_allocate(bytes);
      return p;
    }
    void* p = std::aligned_alloc(64, round_up(bytes, 64));
    if (!p) cannot_allocate(bytes);
    std::memset(p, 0, bytes);
    return p;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const size_t need = round_up(bytes, kPage);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < need) continue;
    const size_t at = it->first, left = it->second - need;
    free_.erase(it);
    if (left) free_[at + need] = left;
    // Freed pages were dropped (MADV_DONTNEED), so they read back as zeros.
    return base_ + at;
  }
  if (top_ + need > reserved_) throw Error("checked CPU backend: out of reserved address space");
  const size_t at = top_;
  top_ += need;
  if (depth_ > 0) mprotect(base_ + at, need, PROT_READ | PROT_WRITE);
  return base_ + at;
}

void HostMemory::release(void* p, size_t bytes) noexcept {
  if (!p) return;
  if (bytes == 0) bytes = 1;
  if (!checked_) {
    if (bytes >= kMmapFrom)
      munmap(p, round_up(bytes, kPage));
    else
      std::free(p);
    return;
  }
  std::lock_guard<std::mutex> lock(mu_);
  const size_t at = static_cast<size_t>(static_cast<char*>(p) - base_), n = round_up(bytes, kPage);
  madvise(p, n, MADV_DONTNEED);
  auto [it, inserted] = free_.emplace(at, n);
  // Coalesce with the neighbours.
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

void HostMemory::protect(bool accessible) {
  if (top_ == 0) return;
  if (mprotect(base_, top_, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
    throw Error(std::string("checked CPU backend: mprotect failed: ") + std::strerror(errno));
}

HostMemory::AccessScope::AccessScope(HostMemory& m) : m_(m) {
  if (!m_.checked_) return;
  std::lock_guard<std::mutex> lock(m_.mu_);
  if (m_.depth_++ == 0) m_.protect(true);
}

HostMemory::AccessScope::~AccessScope() {
  if (!m_.checked_) return;
  std::lock_guard<std::mutex> lock(m_.mu_);
  if (--m_.depth_ == 0) m_.protect(false);
}

}  // namespace tpbatch
