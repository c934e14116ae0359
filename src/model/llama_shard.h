#pragma once
// One rank's Megatron shard of a Llama-family model (Llama, Mistral, Qwen2/3, Phi-3, Gemma 2/3), read straight from the memory-mapped
// safetensors (each rank copies only its slices):
//   ColumnParallelLinear  q/k/v (fused) and gate/up (fused): this rank's output rows
//   RowParallelLinear     o_proj and down: this rank's input columns, partial sums allreduced
//   VocabParallelEmbedding / LM head: this rank's vocabulary rows
// With TP > KV heads each rank keeps one KV head, replicated TP / KV times. Phi-3's fused qkv_proj
// and gate_up_proj are cut into the same slices (rows of q, k, v; rows of gate, up).
// Norm weights are stored as the factor they multiply by: Gemma's (1 + weight) is added at load.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "job/job_spec.h"
#include "model/config.h"
#include "model/linear_weight.h"
#include "model/safetensors.h"
#include "model/shard_placement.h"
#include "model/shard_ranges.h"

namespace tpbatch {

// Weights are backend Buffers: linear layers and the embedding in the weight dtype (the storage
// dtype unless the job asks for another), norms and biases in F32; a quantized checkpoint's linear
// layers keep their F8_E4M3 values and scales whatever the job's dtype (LinearWeight).
struct LayerShard {
  Buffer input_norm, post_norm;  // [H]; with sandwich norms post_norm follows attention (Gemma)
  Buffer pre_ffn_norm, post_ffn_norm;  // [H], sandwich norms only (Gemma 2/3)
  Buffer q_norm, k_norm;         // [head_dim], per-head q/k norms only (Qwen3, Gemma 3)
  Buffer bgu;                    // [2 * inter] gate then up biases, or empty (mlp_bias)
  Buffer bdown;                  // [H], or empty; added after the allreduce
  LinearWeight wqkv;             // [(q_heads + 2 kv_heads) * head_dim, H]
  Buffer bqkv;                   // same rows, or empty
  LinearWeight wo;               // [H, q_heads * head_dim]
  Buffer bo;                     // [H] (Llama with attention_bias), added after the allreduce
  LinearWeight wgu;              // [2 * inter, H]: gate rows then up rows (dense layers)
  LinearWeight wdown;            // [H, inter]
  // Mixture-of-experts layers (Mixtral, Qwen3-MoE; wgu/wdown empty): the router, replicated on
  // every rank, and the experts this rank holds (LlamaShard::expert_range): under
  // parallel.experts: tensor every expert's gate/up rows and down columns of this rank, split like
  // the dense MLP; under expert whole experts, a block of them. Either way the rank's output is a
  // partial sum, and one allreduce completes the layer.
  LinearWeight router;           // [experts, H], then the shared expert's gate row [1, H] if any
  std::vector<LinearWeight> expert_gu;    // per held expert [2 * expert_inter, H]: gate rows then up rows
  std::vector<LinearWeight> expert_down;  // per held expert [H, expert_inter]
  LinearWeight shared_gu;        // Qwen2-MoE's shared expert, this rank's slice like the dense MLP:
  LinearWeight shared_down;      // [2 * shared_inter, H] and [H, shared_inter]; else empty
  bool is_moe() const { return !router.empty(); }
};

struct LlamaShard {
  ModelConfig config;
  ShardPlacement placement;
  DType weight_dtype = DType::F32;
  int64_t q_heads = 0;        // local
  int64_t kv_heads = 0;       // local
  int64_t inter = 0;          // local intermediate size
  int64_t expert_inter = 0;   // local width of each expert's FFN (MoE layers)
  Range expert_range;         // the experts this rank holds (MoE layers; expert_gu[e - begin])
  Range shared_inter_range;   // this rank's slice of the shared expert (Qwen2-MoE), else empty
  Range q_head_range, kv_head_range, inter_range, expert_inter_range, vocab_range;
  int64_t vocab_shard_max = 0;   // largest vocab shard over the TP group (for padded gathers)
  Buffer inv_freq;               // RoPE, F32 [tables][head_dim / 2]: the frequencies, then longrope's long
                                 // factors' (StepBatch::rope_tables 1) when the model has them
  Buffer inv_freq_local;         // the sliding layers' RoPE when it differs (Gemma 3), else empty
  Buffer embedding;              // [vocab shard, H] (first stage; with tied weights also the LM head)
  Buffer lm_head;                // [vocab shard, H] unless tied
  Buffer final_norm;             // [H] (last stage)
  std::vector<LayerShard> layers;

  BufferView lm_head_weights() const { return lm_head.empty() ? embedding.view() : lm_head.view(); }
  size_t weight_bytes() const;
};

// Validates every tensor's shape against the config (naming the tensor on mismatch) and uploads
// this rank's slices to the backend, once, straight from the memory-mapped checkpoint.
LlamaShard load_llama_shard(const ModelConfig& config, const WeightStore& weights, const ShardPlacement& placement,
                            Backend& backend, DType weight_dtype);

// Bytes of weights one rank holds for a placement, computed from shapes alone (for `plan`).
int64_t shard_parameter_count(const ModelConfig& config, const ShardPlacement& placement);

}  // namespace tpbatch
