// Per-head RMSNorm (Qwen3's and Gemma 3's q_norm / k_norm): each head normalised on its own,
// in place, with one weight vector of head_dim shared by all heads.
#include <cmath>

#include "backend/cpu/cpu_family_ops.h"

namespace tpbatch::cpu {

void rmsnorm_heads(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const float* w,
                   float eps) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + r * row_stride + h * head_dim;
      double ss = 0.0;
      for (int64_t d = 0; d < head_dim; ++d) ss += static_cast<double>(v[d]) * v[d];
      const float s = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(head_dim) + eps));
      for (int64_t d = 0; d < head_dim; ++d) v[d] = v[d] * s * w[d];
    }
}

}  // namespace tpbatch::cpu
