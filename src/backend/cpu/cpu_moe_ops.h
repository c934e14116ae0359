#pragma once
// CPU implementation of the mixture-of-experts operation (Backend::weighted_row_sum): a plain
// loop in F32, the reference for the CUDA kernel (kernels/weighted_row_sum.cu).
#include <cstdint>
#include <span>

namespace tpbatch::cpu {

// out[i,:] = sum_j weights[i*k + j] * src[rows[i*k + j] * width ..], j in order, i < rows.size() / k.
void weighted_row_sum(const float* src, std::span<const int64_t> rows, std::span<const float> weights, int64_t k,
                      int64_t width, float* out);

}  // namespace tpbatch::cpu
