#pragma once
// Where one rank's shard sits in a layout: its tensor-parallel slice, its pipeline stage's layers,
// and how the mixture-of-experts layers are split over the TP group. The loader (run_job) and
// `tpbatch plan` (plan/memory_ledger.cpp) both build it here, so the bytes the plan counts are
// those of the shard the run loads.
#include <cstdint>
#include <string>

#include "job/job_spec.h"
#include "model/config.h"
#include "model/shard_ranges.h"

namespace tpbatch {

struct ShardPlacement {
  int tensor = 1;       // TP degree
  int tp_rank = 0;
  Range layers;         // this pipeline stage's layers
  bool has_embedding = true;   // first stage
  bool has_lm_head = true;     // last stage
  // Mixture-of-experts layers (parallel.experts): kTensor, each expert's gate/up rows and down
  // columns split like the dense MLP; kExpert, whole experts, experts_of_rank() of them.
  ExpertSplit experts = ExpertSplit::kTensor;
};

// The placement of the rank at (pipeline stage `stage`, tensor rank `tp_rank`) of a layout of
// `tensor` x `pipeline` ranks per replica.
ShardPlacement shard_placement(const ModelConfig& config, int tensor, int pipeline, int stage, int tp_rank,
                               ExpertSplit experts);

// The experts whose weights the rank holds: all of them under kTensor (a slice of each), a
// contiguous block of num_experts / tensor under kExpert. Contiguous rather than round-robin:
// Mixtral's and Qwen3-MoE's routers pick experts by score alone (no grouped routing that would make
// neighbouring ids popular together), so neither layout balances better on its own; a block is one
// Range, the same arithmetic as every other split of the shard, and vLLM's default expert map.
Range experts_of_rank(const ModelConfig& config, const ShardPlacement& placement);
// The width of each expert's FFN the rank holds: its slice of it under kTensor, all of it under kExpert.
Range expert_inter_of_rank(const ModelConfig& config, const ShardPlacement& placement);
// The rank's slice of the shared expert's width (Qwen2-MoE), split like the dense MLP under either
// parallel.experts: every token passes through it, so whole copies would only repeat its work.
Range shared_expert_inter_of_rank(const ModelConfig& config, const ShardPlacement& placement);

// Why parallel.experts cannot be honoured for this model at parallel.tensor = `tensor`, or "":
// kExpert needs a mixture-of-experts model and a number of experts divisible by the TP degree.
std::string expert_split_problem(const ModelConfig& config, ExpertSplit experts, int64_t tensor);

}  // namespace tpbatch
