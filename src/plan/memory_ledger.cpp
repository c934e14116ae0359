#include "common/saturating.h"
#include "plan/memory_ledger.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/llama_shard.h"
#include "model/moe.h"
#include "model/shard_bytes.h"
#include "model/shard_placement.h"

namespace tpbatch {
namespace {

// The shard of the rank at (stage, tp_rank) of `layout`.
ShardPlacement placement_in(const ModelConfig& config, const Layout& layout, int stage, int tp_rank,
                            ExpertSplit experts) {
  return shard_placement(config, layout.tensor, layout.pipeline, stage, tp_rank, experts);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t stage_kv_bytes_per_token(const ModelConfig& config, const Layout& layout, int stage, int tp_rank,
                                 DType kv_dtype) {
  return kv_bytes_per_token_of_rank(config, layout.tensor, tp_rank,
                                    layers_of_stage(config.num_layers, layout.pipeline, stage).size(), kv_dtype);
}

}  // namespace

DType dtype_of_name(const std::string& name, const std::string& key) {
  if (name == "float32") return DType::F32;
  if (name == "bfloat16") return DType::BF16;
  if (name == "float16") return DType::F16;
  throw JobError(key + ": unsupported dtype '" + name + "' (float32, bfloat16 or float16)");
}

bool tensor_group_fits_node(int world_size, int tensor, int ranks_per_node) {
  if (ranks_per_node <= 0 || tensor <= 0) return false;
  for (int leader = 0; leader < world_size; leader += tensor) {
    const int last = std::min(world_size, leader + tensor) - 1;
    if (leader / ranks_per_node != last / ranks_per_node) return false;
  }
  return true;
}

std::vector<Layout> legal_layouts(const ModelConfig& config, int world_size, int ranks_per_node) {
  std::vector<Layout> out;
  for (int t = 1; t <= world_size; ++t) {
    if (world_size % t != 0 || !tensor_group_fits_node(world_size, t, ranks_per_node)) continue;
    for (int p = 1; p <= world_size / t; ++p) {
      const Layout l{world_size, t, p};
      if (layout_problem(l, config).empty()) out.push_back(l);
    }
  }
  return out;
}

int64_t weights_bytes_per_rank(const ModelConfig& config, const Layout& layout, DType weight_dtype,
                               ExpertSplit experts) {
  int64_t most = 0;
  for (int s = 0; s < layout.pipeline; ++s)
    for (int r = 0; r < layout.tensor; ++r)
      most = std::max(most, shard_weight_bytes(config, placement_in(config, layout, s, r, experts), weight_dtype));
  return most;
}

int64_t kv_bytes_per_token_per_rank(const ModelConfig& config, const Layout& layout, DType kv_dtype) {
  int64_t most = 0;
  for (int s = 0; s < layout.pipeline; ++s)
    for (int r = 0; r < layout.tensor; ++r)
      most = std::max(most, stage_kv_bytes_per_token(config, layout, s, r, kv_dtype));
  return most;
}

// Activations and workspace of one forward step, per rank (the largest TP shard), in float32:
//   kWorkspaceFactor x max_batch_tokens x (3 H [x, h, o/down outputs] + (q + 2 kv) hd [fused qkv]
//                                          + q hd [attention out] + 3 inter/TP [gate, up, act]) x 4 B
//   + max_seqs x vocab/TP x 4 B (logits of the rows that sample)
//   + kWorkspaceFactor x the MoE block's scratch at max_batch_tokens, in float32 (its buffers grow
//     by a quarter at a time) + its host routing buffers on the CPU (mixture-of-experts models)
//   + kDeviceContextBytes and, for a quantized checkpoint, the CUDA backend's dequantize scratch
//     (shard_dequantize_scratch_bytes) when an accelerator's memory was given.
int64_t reserved_bytes_per_rank(const ModelConfig& config, const Layout& layout, const PlanInputs& in) {
  const int t = layout.tensor;
  const int64_t H = config.hidden_size, hd = config.head_dim;
  const int64_t q = ceil_div(config.num_heads, t) * hd;
  const int64_t kv = kv_heads_of_rank(config, t, 0).size() * hd;
  const int64_t inter = ceil_div(config.intermediate_size, t);
  const int64_t per_token_floats = 3 * H + (q + 2 * kv) + q + 3 * inter;
  const double activations =
      kWorkspaceFactor * static_cast<double>(in.max_batch_tokens) * static_cast<double>(per_token_floats) * 4.0;
  const int64_t logits = saturating_mul(saturating_mul(in.max_seqs, ceil_div(config.vocab_size, t)), 4);
  const int64_t moe = moe_scratch_bytes_per_rank(config, layout, in);
  const int64_t moe_host = in.accelerator ? 0 : moe_routing_host_bytes(config, in.max_batch_tokens);
  return static_cast<int64_t>(std::ceil(activations + kWorkspaceFactor * static_cast<double>(moe))) + moe_host +
         logits + (in.accelerator ? kDeviceContextBytes + dequantize_scratch_bytes_per_rank(config, layout, in) : 0);
}

int64_t dequantize_scratch_bytes_per_rank(const ModelConfig& config, const Layout& layout, const PlanInputs& in) {
  int64_t most = 0;
  for (int s = 0; s < layout.pipeline; ++s)
    for (int r = 0; r < layout.tensor; ++r)
      most = std::max(most, shard_dequantize_scratch_bytes(config, placement_in(config, layout, s, r, in.experts)));
  return most;
}

// The MoE block's scratch (one block per rank, shared by its layers) at max_batch_tokens, float32.
int64_t moe_scratch_bytes_per_rank(const ModelConfig& config, const Layout& layout, const PlanInputs& in) {
  int64_t most = 0;
  for (int r = 0; r < layout.tensor; ++r)
    most = std::max(most, moe_scratch(config, placement_in(config, layout, 0, r, in.experts), in.max_batch_tokens)
                              .bytes(DType::F32));
  return most;
}

double allreduce_us_per_decode_step(const ModelConfig& config, const Layout& layout, const PlanInputs& in) {
  const int t = layout.tensor;
  if (t <= 1) return 0.0;
  const int64_t layers = layers_of_stage(config.num_layers, layout.pipeline, 0).size();  // the largest stage
  const double S = static_cast<double>(in.max_seqs) * static_cast<double>(config.hidden_size) *
                   static_cast<double>(dtype_size(in.activation_dtype));
  const double bytes_per_us = in.bandwidth_gbs * 1e3;  // GB/s = 1e9 B/s = 1e3 B/us
  const double one = in.alpha_us + 2.0 * (t - 1) / t * S / bytes_per_us;
  return 2.0 * static_cast<double>(layers) * one;
}

LayoutLedger ledger_of(const ModelConfig& config, const Layout& layout, const PlanInputs& in) {
  LayoutLedger g;
  g.tensor = layout.tensor;
  g.pipeline = layout.pipeline;
  g.data = layout.data();
  g.layers_per_stage = layers_of_stage(config.num_layers, layout.pipeline, 0).size();
  g.weights_bytes_per_rank = weights_bytes_per_rank(config, layout, in.weight_dtype, in.experts);
  g.kv_bytes_per_token_per_rank = kv_bytes_per_token_per_rank(config, layout, in.kv_dtype);
  g.reserved_bytes_per_rank = reserved_bytes_per_rank(config, layout, in);
  const double usable = std::floor(static_cast<double>(in.device_memory_bytes) * in.memory_utilization);

  // The tightest rank decides: every rank of a replica must hold the KV of every token in flight.
  bool first = true;
  for (int s = 0; s < layout.pipeline; ++s) {
    for (int r = 0; r < layout.tensor; ++r) {
      const int64_t w = shard_weight_bytes(config, placement_in(config, layout, s, r, in.experts), in.weight_dtype);
      const int64_t budget = static_cast<int64_t>(usable) - w - g.reserved_bytes_per_rank;
      const int64_t per_token = stage_kv_bytes_per_token(config, layout, s, r, in.kv_dtype);
      const int64_t tokens = budget <= 0 || per_token <= 0 ? 0 : budget / per_token;
      if (first || tokens < g.kv_tokens_per_rank) g.kv_tokens_per_rank = tokens;
      if (first || budget < g.kv_budget_bytes_per_rank) g.kv_budget_bytes_per_rank = budget;
      first = false;
    }
  }
  g.concurrent_rows = in.row_tokens > 0 ? g.kv_tokens_per_rank / in.row_tokens : 0;
  g.fits = g.kv_tokens_per_rank >= in.row_tokens && g.kv_tokens_per_rank > 0;
  g.allreduce_us_per_decode_step = allreduce_us_per_decode_step(config, layout, in);
  g.moe_scratch_bytes_per_rank = moe_scratch_bytes_per_rank(config, layout, in);
  for (int s = 0; s < layout.pipeline; ++s)
    for (int r = 0; r < layout.tensor; ++r)
      g.expert_weights_bytes_per_rank =
          std::max(g.expert_weights_bytes_per_rank,
                   shard_expert_weight_bytes(config, placement_in(config, layout, s, r, in.experts), in.weight_dtype));
  return g;
}

std::vector<ExpertSplitComparison> compare_expert_splits(const ModelConfig& config, const PlanInputs& in) {
  std::vector<ExpertSplitComparison> out;
  if (config.num_experts <= 0) return out;
  for (const Layout& l : legal_layouts(config, in.world_size, in.ranks_per_node)) {
    ExpertSplitComparison c;
    c.tensor = l.tensor, c.pipeline = l.pipeline;
    for (ExpertSplit split : {ExpertSplit::kTensor, ExpertSplit::kExpert}) {
      ExpertSplitOption& o = split == ExpertSplit::kTensor ? c.tensor_split : c.expert_split;
      o.legal = expert_split_problem(config, split, l.tensor).empty();
      if (!o.legal) continue;
      PlanInputs with = in;
      with.experts = split;
      o.ledger = ledger_of(config, l, with);
    }
    out.push_back(c);
  }
  return out;
}

Plan make_plan(const ModelConfig& config, const PlanInputs& in) {
  Plan plan;
  plan.inputs = in;
  for (const Layout& l : legal_layouts(config, in.world_size, in.ranks_per_node))
    if (expert_split_problem(config, in.experts, l.tensor).empty()) plan.layouts.push_back(ledger_of(config, l, in));
  return plan;
}

}  // namespace tpbatch
