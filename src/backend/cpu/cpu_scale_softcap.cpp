// Element-wise scaling (Gemma's sqrt(hidden) embedding scale) and soft-capping (Gemma 2's
// final logits: cap * tanh(x / cap)).
#include <cmath>

#include "backend/cpu/cpu_family_ops.h"

namespace tpbatch::cpu {

void scale(float* x, size_t count, float factor) {
  for (size_t i = 0; i < count; ++i) x[i] *= factor;
}

void softcap(float* x, size_t count, float cap) {
  for (size_t i = 0; i < count; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

}  // namespace tpbatch::cpu
