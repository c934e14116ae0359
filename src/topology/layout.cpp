#include "topology/layout.h"

namespace tpbatch {

RankCoords coords_of(const Layout& layout, int world_rank) {
  RankCoords c;
  c.tp = world_rank % layout.tensor;
  c.pp = (world_rank / layout.tensor) % layout.pipeline;
  c.dp = world_rank / (layout.tensor * layout.pipeline);
  return c;
}

int world_rank_of(const Layout& layout, const RankCoords& c) {
  return (c.dp * layout.pipeline + c.pp) * layout.tensor + c.tp;
}

std::string layout_problem(const Layout& layout, const ModelConfig& config) {
  const int t = layout.tensor, p = layout.pipeline, w = layout.world_size;
  const std::string tp = "parallel.tensor=" + std::to_string(t);
  if (t < 1 || p < 1) return "parallel.tensor and parallel.pipeline must be at least 1";
  if (w % (t * p) != 0)
    return "world size " + std::to_string(w) + " is not a multiple of tensor (" + std::to_string(t) +
           ") x pipeline (" + std::to_string(p) + ")";
  if (t > config.num_heads)
    return tp + " exceeds the model's " + std::to_string(config.num_heads) + " attention heads";
  if (config.num_heads % t != 0)
    return "the model's " + std::to_string(config.num_heads) + " attention heads are not divisible by " + tp;
  const int64_t kv = config.num_kv_heads;
  if (t <= kv ? kv % t != 0 : t % kv != 0)
    return "the model's " + std::to_string(kv) + " key/value heads are neither divisible by " + tp +
           " nor a divisor of it";
  if (p > config.num_layers)
    return "parallel.pipeline=" + std::to_string(p) + " exceeds the model's " + std::to_string(config.num_layers) +
           " layers";
  return "";
}

}  // namespace tpbatch
