#pragma once
// Where one rank's shard sits in a layout: its tensor-parallel slice and its pipeline stage's
// layers. The loader (run_job) and `tpbatch plan` (plan/memory_ledger.cpp) both build it here, so
// the bytes the plan counts are those of the shard the run loads.
#include "model/config.h"
#include "topology/layout.h"

namespace tpbatch {

struct ShardPlacement {
  int tensor = 1;       // TP degree
  int tp_rank = 0;
  Range layers;         // this pipeline stage's layers
  bool has_embedding = true;   // first stage
  bool has_lm_head = true;     // last stage
};

// The placement of the rank at (pipeline stage `stage`, tensor rank `tp_rank`) of `layout`.
ShardPlacement shard_placement(const ModelConfig& config, const Layout& layout, int stage, int tp_rank);

}  // namespace tpbatch
