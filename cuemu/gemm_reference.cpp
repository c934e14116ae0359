#include "gemm_reference.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace cuemu {
namespace {

float load(const void* p, cudaDataType t, size_t i) {
  switch (t) {
    case CUDA_R_32F: return static_cast<const float*>(p)[i];
    case CUDA_R_16F: return __half2float(static_cast<const __half*>(p)[i]);
    default: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
  }
}
void store(void* p, cudaDataType t, size_t i, float v) {
  switch (t) {
    case CUDA_R_32F: static_cast<float*>(p)[i] = v; break;
    case CUDA_R_16F: static_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
  }
}
float to_tf32(float v) {  // round to nearest, ties away, to 10 mantissa bits
  uint32_t b;
  std::memcpy(&b, &v, 4);
  if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x1000u) & ~0x1fffu;
  std::memcpy(&v, &b, 4);
  return v;
}

}  // namespace

void reference_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const void* A, cudaDataType a_type, int lda,
                    const void* B, cudaDataType b_type, int ldb, float beta, void* C, cudaDataType c_type, int ldc,
                    bool tf32) {
  // op(A) row i and op(B) column j as contiguous float vectors of k, so the inner loop is a dot.
  std::vector<float> a(size_t(m) * k), b(size_t(n) * k);
  for (int i = 0; i < m; ++i)
    for (int p = 0; p < k; ++p) {
      const float v = load(A, a_type, ta ? size_t(p) + size_t(i) * lda : size_t(i) + size_t(p) * lda);
      a[size_t(i) * k + p] = tf32 ? to_tf32(v) : v;
    }
  for (int j = 0; j < n; ++j)
    for (int p = 0; p < k; ++p) {
      const float v = load(B, b_type, tb ? size_t(j) + size_t(p) * ldb : size_t(p) + size_t(j) * ldb);
      b[size_t(j) * k + p] = tf32 ? to_tf32(v) : v;
    }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      const float* x = a.data() + size_t(i) * k;
      const float* y = b.data() + size_t(j) * k;
      double acc = 0.0;
      for (int p = 0; p < k; ++p) acc += double(x[p]) * double(y[p]);
      const size_t ci = size_t(i) + size_t(j) * ldc;
      float v = alpha * static_cast<float>(acc);
      if (beta != 0.0f) v += beta * load(C, c_type, ci);
      store(C, c_type, ci, v);
    }
}

}  // namespace cuemu
