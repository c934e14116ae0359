#include "engine/embedding_pooling.h"

#include <cmath>

#include "common/error.h"

namespace tpbatch {

std::optional<PooledRows> pooled_rows(Pooling p, int64_t chunk_begin, int64_t chunk_rows, int64_t prompt_len) {
  if (chunk_rows <= 0) return std::nullopt;
  switch (p) {
    case Pooling::Cls:
      if (chunk_begin == 0) return PooledRows{0, 1};
      return std::nullopt;
    case Pooling::Last:
      if (chunk_begin + chunk_rows == prompt_len) return PooledRows{chunk_rows - 1, 1};
      return std::nullopt;
    case Pooling::Mean:
      return PooledRows{0, chunk_rows};
  }
  return std::nullopt;
}

void EmbeddingAccumulator::add(const float* row_sum, int64_t hidden, int64_t rows) {
  if (sum_.empty()) sum_.assign(static_cast<size_t>(hidden), 0.0);
  if (static_cast<int64_t>(sum_.size()) != hidden) throw Error("internal error: embedding width changed");
  for (int64_t i = 0; i < hidden; ++i) sum_[static_cast<size_t>(i)] += row_sum[i];
  count_ += rows;
}

std::vector<float> EmbeddingAccumulator::finish(Pooling p, bool normalize) const {
  std::vector<double> v = sum_;
  if (p == Pooling::Mean && count_ > 0)
    for (double& x : v) x /= static_cast<double>(count_);
  if (normalize) {
    double norm = 0.0;
    for (double x : v) norm += x * x;
    norm = std::sqrt(norm);
    if (norm > 0)
      for (double& x : v) x /= norm;
  }
  return std::vector<float>(v.begin(), v.end());
}

}  // namespace tpbatch
