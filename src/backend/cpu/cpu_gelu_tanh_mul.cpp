// GeGLU with the tanh approximation of GeLU (HF's gelu_pytorch_tanh), Gemma's gated MLP:
// out = 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * u.
#include <cmath>
#include <numbers>

#include "backend/cpu/cpu_family_ops.h"

namespace tpbatch::cpu {

void gelu_tanh_mul(const float* gu, float* out, int64_t m, int64_t inter) {
  const float k = static_cast<float>(std::sqrt(2.0 / std::numbers::pi));
  for (int64_t r = 0; r < m; ++r) {
    const float* g = gu + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t i = 0; i < inter; ++i) {
      const float x = g[i];
      o[i] = 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x))) * u[i];
    }
  }
}

}  // namespace tpbatch::cpu
