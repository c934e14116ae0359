// The portable kernels of gemm_nt: plain C++ for CPUs without AVX2 (and non-x86). Same blocking
// idea as the AVX2 kernel: four weight rows are widened to fp32 once into a thread-local buffer
// and used for every row of x; the dot products are `omp simd` reductions so the compiler may
// vectorise them with whatever the target has (SSE on x86-64-v2).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/gemm/gemm_kernels.h"

namespace tpbatch::cpu::detail {
namespace {

inline float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Same arithmetic as tpbatch::f16_to_f32 (dtype.cpp), inline and branch-free so the widening
// loop vectorises: the exponent is rebiased by a multiply, which also gets subnormals right.
inline float f16_bits_to_f32(uint16_t h) {
  float f = from_bits(uint32_t(h & 0x7fffu) << 13) * 0x1.0p112f;
  uint32_t o;
  std::memcpy(&o, &f, 4);
  o |= f >= 65536.0f ? 255u << 23 : 0u;  // was inf / NaN
  o |= uint32_t(h & 0x8000u) << 16;
  return from_bits(o);
}

}  // namespace

void widen_portable(const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
  if (a.wtype == DType::F8E4M3) return dequant_fp8_portable(a, r0, rows, out);
  if (a.wtype == DType::I4) return dequant_int4_portable(a, r0, rows, out);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = (r0 + r) * a.ldw;
    float* dst = out + r * a.k;
    if (a.wtype == DType::F32) {
      std::memcpy(dst, static_cast<const float*>(a.w) + base, size_t(a.k) * 4);
    } else if (a.wtype == DType::BF16) {
      const uint16_t* src = static_cast<const uint16_t*>(a.w) + base;
#pragma omp simd
      for (int64_t kk = 0; kk < a.k; ++kk) dst[kk] = from_bits(uint32_t(src[kk]) << 16);
    } else {
      const uint16_t* src = static_cast<const uint16_t*>(a.w) + base;
#pragma omp simd
      for (int64_t kk = 0; kk < a.k; ++kk) dst[kk] = f16_bits_to_f32(src[kk]);
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
