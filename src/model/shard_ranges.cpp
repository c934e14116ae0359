#include "model/shard_ranges.h"

#include <algorithm>

namespace tpbatch {

Range balanced_split(int64_t len, int parts, int index) {
  return Range{len * index / parts, len * (index + 1) / parts};
}

Range kv_heads_of_rank(const ModelConfig& config, int tensor, int tp_rank) {
  const int64_t kv = config.num_kv_heads;
  if (tensor <= kv) return balanced_split(kv, tensor, tp_rank);
  const int64_t head = tp_rank / (tensor / kv);
  return Range{head, head + 1};
}

Range layers_of_stage(int64_t num_layers, int pipeline, int stage) {
  const int64_t base = num_layers / pipeline, extra = num_layers % pipeline;
  const int64_t begin = stage * base + std::min<int64_t>(stage, extra);
  return Range{begin, begin + base + (stage < extra ? 1 : 0)};
}

}  // namespace tpbatch
