#pragma once
// Host memory for the CPU backend. Plain mode: zero-filled allocations (large ones mmapped, so
// an unused KV cache costs no resident memory; from 2 MiB on a huge-page boundary with transparent
// huge pages asked for, as the weights stream faster on them). Checked mode: every allocation comes from one
// reserved address range that is mapped PROT_NONE except while a backend call runs (an
// AccessScope is alive), so host code that reads backend memory behind the backend's back —
// exactly what would crash on a GPU — crashes in the tests instead.
#include <cstddef>
#include <map>
#include <mutex>

namespace tpbatch {

class HostMemory {
 public:
  explicit HostMemory(bool checked);
  ~HostMemory();
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  void* allocate(size_t bytes);  // zero-filled; throws Error when there is no room
  void release(void* p, size_t bytes) noexcept;
  bool checked() const { return checked_; }

  // Makes backend memory accessible for the scope's life (nesting: the outermost counts).
  class AccessScope {
   public:
    explicit AccessScope(HostMemory& m);
    ~AccessScope();
    AccessScope(const AccessScope&) = delete;
    AccessScope& operator=(const AccessScope&) = delete;

   private:
    HostMemory& m_;
  };

 private:
  void protect(bool accessible);
  bool checked_;
  // Checked mode: [base_, base_ + reserved_) reserved; [base_, base_ + top_) handed out at some point.
  char* base_ = nullptr;
  size_t reserved_ = 0;
  size_t top_ = 0;
  std::map<size_t, size_t> free_;  // offset -> bytes of freed blocks (first fit, coalesced)
  int depth_ = 0;
  std::mutex mu_;
};

}  // namespace tpbatch
