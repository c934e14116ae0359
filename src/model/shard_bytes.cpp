#include "model/shard_bytes.h"

#include "topology/layout.h"

namespace tpbatch {

int64_t shard_weight_bytes(const ModelConfig& cfg, const ShardPlacement& place, DType weight_dtype) {
  const int t = place.tensor, r = place.tp_rank;
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim;
  const int64_t q = balanced_split(cfg.num_heads, t, r).size() * hd;
  const int64_t kv = kv_heads_of_rank(cfg, t, r).size() * hd;
  const int64_t inter = balanced_split(cfg.intermediate_size, t, r).size();
  const int64_t vocab = balanced_split(cfg.vocab_size, t, r).size();
  const int64_t layers = place.layers.size();
  // Mixture-of-experts layers hold the replicated router [experts, H] and every expert's gate/up
  // rows and down columns of this rank instead of the dense MLP.
  int64_t moe_layers = 0;
  for (int64_t l = place.layers.begin; l < place.layers.end; ++l) moe_layers += cfg.is_moe_layer(l);
  const int64_t expert_inter = balanced_split(cfg.expert_intermediate_size, t, r).size();
  // Elements kept in the weight dtype, and in F32.
  int64_t wide = layers * ((q + 2 * kv) * H + H * q) + (layers - moe_layers) * 3 * inter * H +
                 moe_layers * cfg.num_experts * (H + 3 * expert_inter * H);
  int64_t per_layer_f32 = 2 * H;               // input and post-attention norms
  if (cfg.sandwich_norms) per_layer_f32 += 2 * H;  // pre/post feed-forward norms (Gemma 2/3)
  if (cfg.qk_norm) per_layer_f32 += 2 * hd;        // per-head q/k norms (Qwen3, Gemma 3)
  if (cfg.attention_bias) {
    per_layer_f32 += q + 2 * kv;
    // Llama's attention_bias also biases o_proj (Qwen2's does not); the loader reads it when the
    // checkpoint has it, which a Llama checkpoint with attention_bias does.
    if (cfg.architecture == "LlamaForCausalLM") per_layer_f32 += H;
  }
  if (cfg.mlp_bias) per_layer_f32 += 2 * inter + H;  // gate/up slices, the whole down bias
  int64_t f32 = layers * per_layer_f32;
  // RoPE inverse frequencies (LlamaShard counts them with its weights): [head_dim / 2], and the
  // sliding layers' own table when they have one.
  f32 += (hd / 2) * (cfg.rope_local_theta > 0 ? 2 : 1);
  const bool tied = cfg.tie_word_embeddings;
  if (place.has_embedding) wide += vocab * H;
  if (place.has_lm_head) {
    f32 += H;  // final norm
    if (!(tied && place.has_embedding)) wide += vocab * H;  // own LM head, or the tied table on a later stage
  }
  return wide * static_cast<int64_t>(dtype_size(weight_dtype)) + f32 * 4;
}

int64_t kv_bytes_per_token_of_rank(const ModelConfig& cfg, int tensor, int tp_rank, int64_t layers, DType kv_dtype) {
  const int64_t kv_heads = kv_heads_of_rank(cfg, tensor, tp_rank).size();
  return 2 * kv_heads * cfg.head_dim * static_cast<int64_t>(dtype_size(kv_dtype)) * layers;
}

}  // namespace tpbatch
