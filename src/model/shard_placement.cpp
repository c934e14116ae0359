#include "model/shard_placement.h"

namespace tpbatch {

ShardPlacement shard_placement(const ModelConfig& config, int tensor, int pipeline, int stage, int tp_rank,
                               ExpertSplit experts) {
  ShardPlacement p;
  p.tensor = tensor;
  p.tp_rank = tp_rank;
  p.layers = layers_of_stage(config.num_layers, pipeline, stage);
  p.has_embedding = stage == 0;
  p.has_lm_head = stage == pipeline - 1;
  p.experts = experts;
  return p;
}

Range experts_of_rank(const ModelConfig& config, const ShardPlacement& p) {
  if (p.experts == ExpertSplit::kExpert) return balanced_split(config.num_experts, p.tensor, p.tp_rank);
  return Range{0, config.num_experts};
}

Range expert_inter_of_rank(const ModelConfig& config, const ShardPlacement& p) {
  if (p.experts == ExpertSplit::kExpert) return Range{0, config.expert_intermediate_size};
  return balanced_split(config.expert_intermediate_size, p.tensor, p.tp_rank);
}

Range shared_expert_inter_of_rank(const ModelConfig& config, const ShardPlacement& p) {
  return balanced_split(config.shared_expert_intermediate_size, p.tensor, p.tp_rank);
}

std::string expert_split_problem(const ModelConfig& config, ExpertSplit experts, int64_t tensor) {
  if (experts != ExpertSplit::kExpert) return "";
  // An error rather than a warning: a job that asks for expert parallelism and silently runs
  // without it would be measured, and reported, as something it is not.
  if (config.num_experts <= 0)
    return "parallel.experts: expert applies to mixture-of-experts models (Mixtral, Qwen3-MoE); " +
           config.architecture + " has no experts (leave parallel.experts at tensor)";
  if (tensor < 1 || config.num_experts % tensor != 0)
    return "parallel.experts: expert gives every tensor-parallel rank whole experts, but the model's " +
           std::to_string(config.num_experts) + " experts are not divisible by parallel.tensor=" +
           std::to_string(tensor) + " (use parallel.experts: tensor, or a tensor degree that divides " +
           std::to_string(config.num_experts) + ")";
  return "";
}

}  // namespace tpbatch
