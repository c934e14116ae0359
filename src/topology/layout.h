#pragma once
// How a world of ranks is cut into tensor-parallel groups, pipeline stages and data-parallel
// replicas: rank = (dp * PP + pp) * TP + tp, TP varying fastest (vLLM/TensorRT-LLM/FT layout).
// Pure arithmetic, no MPI: shared by `run` and `plan`.
#include <cstdint>
#include <string>

#include "model/config.h"

namespace tpbatch {

struct Layout {
  int world_size = 1;
  int tensor = 1;
  int pipeline = 1;
  int data() const { return world_size / (tensor * pipeline); }
};

struct RankCoords {
  int dp = 0, pp = 0, tp = 0;
};

RankCoords coords_of(const Layout& layout, int world_rank);
int world_rank_of(const Layout& layout, const RankCoords& c);

// Empty when the layout can run this model; otherwise the reason (names heads or world size).
std::string layout_problem(const Layout& layout, const ModelConfig& config);

// Megatron shard sizes. Uneven splits are balanced: rank r of n gets [r*len/n, (r+1)*len/n).
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range balanced_split(int64_t len, int parts, int index);

// KV heads a tensor-parallel rank keeps: its own slice when TP <= KV heads, else one head
// replicated TP / KV times (as vLLM does).
Range kv_heads_of_rank(const ModelConfig& config, int tensor, int tp_rank);

// Contiguous layer ranges per pipeline stage (earlier stages take the extra layers).
Range layers_of_stage(int64_t num_layers, int pipeline, int stage);

}  // namespace tpbatch
