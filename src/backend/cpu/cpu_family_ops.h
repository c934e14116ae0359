#pragma once
// CPU implementations of the element-wise operations the model families beyond Llama need
// (Backend::rmsnorm_heads, gelu_tanh_mul, scale, softcap). Plain loops in F32: the reference the
// CUDA kernels are tested against (rmsnorm_heads in kernels/rmsnorm.cu, gelu_tanh_mul in
// kernels/silu_mul.cu, scale and softcap in kernels/elementwise.cu).
#include <cstddef>
#include <cstdint>

namespace tpbatch::cpu {

void rmsnorm_heads(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const float* w,
                   float eps);
void gelu_tanh_mul(const float* gu, float* out, int64_t m, int64_t inter);
void scale(float* x, size_t count, float factor);
void softcap(float* x, size_t count, float cap);

}  // namespace tpbatch::cpu
