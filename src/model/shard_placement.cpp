#include "model/shard_placement.h"

namespace tpbatch {

ShardPlacement shard_placement(const ModelConfig& config, const Layout& layout, int stage, int tp_rank) {
  ShardPlacement p;
  p.tensor = layout.tensor;
  p.tp_rank = tp_rank;
  p.layers = layers_of_stage(config.num_layers, layout.pipeline, stage);
  p.has_embedding = stage == 0;
  p.has_lm_head = stage == layout.pipeline - 1;
  return p;
}

}  // namespace tpbatch
