#pragma once
// Size arithmetic that cannot wrap: job keys meant as "no limit" (engine.max_seqs = 2^63-1) and
// large config values (max_position_embeddings) meet in products; a wrapped product once sized a
// KV cache to one block. Non-negative operands; results stop at INT64_MAX.
#include <cstdint>
#include <limits>

namespace tpbatch {

inline int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

inline int64_t saturating_add(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

// ceil(a / b) for a >= 0, b > 0, without forming a + b - 1.
inline int64_t ceil_div_no_overflow(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace tpbatch
