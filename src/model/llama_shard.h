#pragma once
// One rank's Megatron shard of a Llama-family model, read straight from the memory-mapped
// safetensors (each rank copies only its slices):
//   ColumnParallelLinear  q/k/v (fused) and gate/up (fused): this rank's output rows
//   RowParallelLinear     o_proj and down: this rank's input columns, partial sums allreduced
//   VocabParallelEmbedding / LM head: this rank's vocabulary rows
// With TP > KV heads each rank keeps one KV head, replicated TP / KV times.
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"
#include "topology/layout.h"

namespace tpbatch {

struct ShardPlacement {
  int tensor = 1;       // TP degree
  int tp_rank = 0;
  Range layers;         // this pipeline stage's layers
  bool has_embedding = true;   // first stage
  bool has_lm_head = true;     // last stage
};

struct LayerShard {
  std::vector<float> input_norm, post_norm;  // [H]
  std::vector<float> wqkv;                   // [(q_heads + 2 kv_heads) * head_dim, H]
  std::vector<float> bqkv;                   // same rows, or empty
  std::vector<float> wo;                     // [H, q_heads * head_dim]
  std::vector<float> bo;                     // [H] (Llama with attention_bias), added after the allreduce
  std::vector<float> wgu;                    // [2 * inter, H]: gate rows then up rows
  std::vector<float> wdown;                  // [H, inter]
};

struct LlamaShard {
  ModelConfig config;
  ShardPlacement placement;
  int64_t q_heads = 0;        // local
  int64_t kv_heads = 0;       // local
  int64_t inter = 0;          // local intermediate size
  Range q_head_range, kv_head_range, inter_range, vocab_range;
  int64_t vocab_shard_max = 0;   // largest vocab shard over the TP group (for padded gathers)
  std::vector<float> inv_freq;   // RoPE
  std::vector<float> embedding;  // [vocab shard, H] (first stage; with tied weights also the LM head)
  std::vector<float> lm_head;    // [vocab shard, H] unless tied
  std::vector<float> final_norm; // [H] (last stage)
  std::vector<LayerShard> layers;

  const float* lm_head_weights() const { return lm_head.empty() ? embedding.data() : lm_head.data(); }
  size_t weight_bytes() const;
};

// Validates every tensor's shape against the config (naming the tensor on mismatch) and loads
// this rank's slices as float32.
LlamaShard load_llama_shard(const ModelConfig& config, const WeightStore& weights, const ShardPlacement& placement);

// Bytes of weights one rank holds for a placement, computed from shapes alone (for `plan`).
int64_t shard_parameter_count(const ModelConfig& config, const ShardPlacement& placement);

}  // namespace tpbatch
