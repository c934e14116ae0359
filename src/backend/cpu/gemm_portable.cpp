// The portable kernels of gemm_nt: plain C++ for CPUs without AVX2 (and non-x86). Same blocking
// idea as the AVX2 kernel: four weight rows are widened to fp32 once into a thread-local buffer
// and used for every row of x; the dot products are `omp simd` reductions so the compiler may
// vectorise them with whatever the target has (SSE on x86-64-v2).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm_kernels.h"

namespace tpbatch::cpu::detail {
namespace {

inline float widen_one(const void* w, DType wtype, int64_t idx) {
  switch (wtype) {
    case DType::BF16: {
      const uint32_t u = uint32_t(static_cast<const uint16_t*>(w)[idx]) << 16;
      float f;
      std::memcpy(&f, &u, 4);
      return f;
    }
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(w)[idx]);
    default: return static_cast<const float*>(w)[idx];
  }
}

}  // namespace

void widen_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    if (a.wtype == DType::F32) {
      std::memcpy(dst, static_cast<const float*>(a.w) + base, size_t(a.k) * 4);
    } else {
      for (int64_t kk = 0; kk < a.k; ++kk) dst[kk] = widen_one(a.w, a.wtype, base + kk);
    }
  }
}

void rows_portable(const GemmArgs& a, int64_t n0, int64_t n1) {
  constexpr int64_t kR = 4;
  thread_local std::vector<float> wide;
  const int64_t k = a.k;
  for (int64_t j = n0; j < n1; j += kR) {
    const int64_t rows = std::min(kR, n1 - j);
    const float* wr[kR];
    if (a.wtype == DType::F32) {
      for (int64_t r = 0; r < rows; ++r) wr[r] = static_cast<const float*>(a.w) + (j + r) * a.ldw;
    } else {
      wide.resize(size_t(kR * k));
      widen_portable(a, j, rows, wide.data());
      for (int64_t r = 0; r < rows; ++r) wr[r] = wide.data() + r * k;
    }
    for (int64_t r = rows; r < kR; ++r) wr[r] = wr[0];  // a short block repeats row 0, unstored
    const float *w0 = wr[0], *w1 = wr[1], *w2 = wr[2], *w3 = wr[3];
    for (int64_t i = 0; i < a.m; ++i) {
      const float* xi = a.x + i * a.ldx;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
#pragma omp simd reduction(+ : s0, s1, s2, s3)
      for (int64_t kk = 0; kk < k; ++kk) {
        const float xv = xi[kk];
        s0 += xv * w0[kk];
        s1 += xv * w1[kk];
        s2 += xv * w2[kk];
        s3 += xv * w3[kk];
      }
      const float s[kR] = {s0, s1, s2, s3};
      float* yi = a.y + i * a.ldy + j;
      for (int64_t r = 0; r < rows; ++r) yi[r] = s[r];
    }
  }
}

}  // namespace tpbatch::cpu::detail
