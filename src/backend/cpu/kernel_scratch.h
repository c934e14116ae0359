#pragma once
// A growable, 64-byte-aligned scratch buffer for the GEMM kernels' thread-local staging (x^T,
// widened weight slices, activations split into bf16 terms).
//
// Internal linkage on purpose: each kernel file includes this AFTER raising its ISA with
// `#pragma GCC target`, so each gets its own copy compiled for that ISA. With external linkage
// (std::vector, or inline functions shared between the files) the linker keeps one copy of each
// function, which could be the AVX-512 one, for every caller, including AVX2-only CPUs. The
// standard headers it needs are included by the kernel files before their pragma.
#include <cstdlib>
#include <new>

namespace tpbatch::cpu::detail {
namespace {

template <typename T>
struct AlignedScratch {
  T* p = nullptr;
  size_t cap = 0;  // elements
  AlignedScratch() = default;
  AlignedScratch(const AlignedScratch&) = delete;
  AlignedScratch& operator=(const AlignedScratch&) = delete;
  ~AlignedScratch() { std::free(p); }
  // At least n elements; the old contents are not kept.
  T* get(size_t n) {
    if (n > cap) {
      std::free(p);
      cap = (n * sizeof(T) + 63) / 64 * 64 / sizeof(T);
      p = static_cast<T*>(std::aligned_alloc(64, cap * sizeof(T)));
      if (!p) throw std::bad_alloc();
    }
    return p;
  }
};

}  // namespace
}  // namespace tpbatch::cpu::detail
