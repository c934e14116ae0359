#include <string>

#include "backend/cpu/cpu_moe_ops.h"
#include "common/error.h"

namespace tpbatch::cpu {

void weighted_row_sum(const float* src, std::span<const int64_t> rows, std::span<const float> weights, int64_t k,
                      int64_t width, float* out) {
  if (k <= 0 || rows.size() % static_cast<size_t>(k) != 0 || weights.size() != rows.size())
    throw Error("CPU backend: weighted_row_sum: " + std::to_string(rows.size()) + " rows and " +
                std::to_string(weights.size()) + " weights are not m groups of k = " + std::to_string(k));
  const int64_t m = static_cast<int64_t>(rows.size()) / k;
#pragma omp parallel for if (m * width > 16384)
  for (int64_t i = 0; i < m; ++i) {
    float* o = out + i * width;
    for (int64_t c = 0; c < width; ++c) o[c] = 0.0f;
    for (int64_t j = 0; j < k; ++j) {
      const float w = weights[static_cast<size_t>(i * k + j)];
      const float* s = src + rows[static_cast<size_t>(i * k + j)] * width;
      for (int64_t c = 0; c < width; ++c) o[c] += w * s[c];
    }
  }
}

}  // namespace tpbatch::cpu
