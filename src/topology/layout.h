#pragma once
// How a world of ranks is cut into tensor-parallel groups, pipeline stages and data-parallel
// replicas: rank = (dp * PP + pp) * TP + tp, TP varying fastest (vLLM/TensorRT-LLM/FT layout).
// Pure arithmetic, no MPI: shared by `run` and `plan`. What each rank keeps of the model is
// model/shard_ranges.h.
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

}  // namespace tpbatch
