#pragma once
// What the GEMM kernel files share to stage data between gemm_nt's row-major operands and their
// register layouts: a growable, 64-byte-aligned scratch buffer (x^T, widened weight slices,
// activations split into bf16 terms), x^T packing, and tiles of y^T back into y.
//
// Internal linkage on purpose: each kernel file includes this AFTER raising its ISA with
// `#pragma GCC target`, so each gets its own copy compiled for that ISA. With external linkage
// (std::vector, or inline functions shared between the files) the linker keeps one copy of each
// function, which could be the AVX-512 one, for every caller, including AVX2-only CPUs. The
// standard headers it needs are included by the kernel files before their pragma.
#include <cstdint>
#include <cstdlib>
#include <new>

#include "backend/cpu/gemm/gemm_kernels.h"

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

// Rows [i0, i0 + rows) of x transposed into xt[k][width], columns past `rows` zero.
inline void pack_xt(const GemmArgs& a, int64_t i0, int rows, int width, float* xt) {
  for (int64_t kk = 0; kk < a.k; ++kk) {
    float* dst = xt + kk * width;
    for (int i = 0; i < rows; ++i) dst[i] = a.x[(i0 + i) * a.ldx + kk];
    for (int i = rows; i < width; ++i) dst[i] = 0.0f;
  }
}

// A tile of y^T, sums[r * lanes + i] for weight row r and row i of x, into y (rows_x x rows_w of it).
inline void store_yt(const float* sums, int lanes, float* y, int64_t ldy, int64_t rows_x, int64_t rows_w) {
  for (int64_t i = 0; i < rows_x; ++i)
    for (int64_t r = 0; r < rows_w; ++r) y[i * ldy + r] = sums[r * lanes + i];
}

}  // namespace
}  // namespace tpbatch::cpu::detail
