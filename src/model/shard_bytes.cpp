#include "model/shard_bytes.h"

#include <algorithm>
#include <string>

#include "backend/dequantize_slices.h"
#include "model/model_family.h"
#include "model/rope_frequencies.h"
#include "model/shard_ranges.h"

namespace tpbatch {

namespace {

// The elements of one rank's shard, by how they are kept: the one count behind both
// shard_weight_bytes (what the loader allocates) and shard_parameter_count (the model's parameters).
struct ShardElements {
  int64_t linear = 0;        // attention and MLP / expert matrices, router, embedding, LM head: weight dtype
  int64_t experts = 0;       // of linear: the routers and the experts' matrices
  int64_t norms_biases = 0;  // norms and biases: F32
  // Llama's attention_bias also biases o_proj (Qwen2's does not); the loader reads it when the
  // checkpoint has it, which a Llama checkpoint with attention_bias does. F32, counted in the bytes
  // only (shard_parameter_count has never counted it).
  int64_t o_proj_bias = 0;
  // RoPE inverse frequencies (LlamaShard counts them with its weights): [head_dim / 2], the
  // sliding layers' own table when they have one, and longrope's long factors' table. F32, not
  // parameters.
  int64_t rope_tables = 0;
  // A quantized checkpoint's projections (attention, MLP, experts; not routers, embeddings or the
  // LM head), counted here instead of in linear: their values (one byte each for fp8; 4-bit ones
  // two a byte, a row of c columns taking (c + 1) / 2), and their F32 scales (one row of scale
  // groups per output row, model/quantization.h; 4-bit weights as many zero points again).
  // Experts' share of each in expert_*.
  int64_t quantized = 0, quantized_bytes = 0, scales = 0;
  int64_t expert_quantized = 0, expert_quantized_bytes = 0, expert_scales = 0;
  // The CUDA backend's BF16 dequantize scratch for the largest of those projections.
  int64_t dequantize_scratch = 0;
};

// Moves a [rows, cols] slice (input columns from col0 of weight_cols) from linear to quantized.
void quantized_slice(const QuantizationConfig& q, int64_t rows, int64_t col0, int64_t cols, int64_t weight_cols,
                     int64_t times, ShardElements& e, bool expert) {
  const int64_t values = times * rows * cols;
  const int64_t bytes = q.int4() ? times * rows * ((cols + 1) / 2) : values;
  const int64_t scales = times * rows * q.scale_groups(col0, cols, weight_cols) * (q.int4() ? 2 : 1);
  e.linear -= values;
  e.quantized += values;
  e.quantized_bytes += bytes;
  e.scales += scales;
  if (times > 0 && rows > 0) e.dequantize_scratch = std::max(e.dequantize_scratch, dequantize_scratch_bytes(rows, cols));
  if (!expert) return;
  e.experts -= values;
  e.expert_quantized += values;
  e.expert_quantized_bytes += bytes;
  e.expert_scales += scales;
}

// The module names of layer l's projections (llama_shard.cpp's names), to ask the config's ignore
// lists which the quantizer left unquantized. A fused group (q|k|v, gate|up) must be quantized
// alike (the loader refuses a mix), so its first member speaks for it; an MoE block's expert 0 and
// shared expert speak for all its experts.
struct LayerModules {
  std::string q, o, gate, down, expert_gate, expert_down, shared_gate, shared_down;
  LayerModules(const ModelConfig& cfg, int64_t l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const bool mixtral = model_family(cfg.architecture).moe == MoeRule::kMixtral;
    const std::string block = p + (mixtral ? "block_sparse_moe." : "mlp.");
    q = p + "self_attn.q_proj";
    o = p + "self_attn.o_proj";
    gate = p + "mlp.gate_proj";
    down = p + "mlp.down_proj";
    expert_gate = block + (mixtral ? "experts.0.w1" : "experts.0.gate_proj");
    expert_down = block + (mixtral ? "experts.0.w2" : "experts.0.down_proj");
    shared_gate = block + "shared_expert.gate_proj";
    shared_down = block + "shared_expert.down_proj";
  }
};

// The projections of a quantized checkpoint, as the loader slices them (llama_shard.cpp), layer by
// layer: those the config's ignore lists name stay in linear (the weights' dtype).
void count_quantized(const ModelConfig& cfg, const ShardPlacement& place, ShardElements& e) {
  const QuantizationConfig& qc = cfg.quantization;
  const int t = place.tensor, r = place.tp_rank;
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim;
  const Range qh = balanced_split(cfg.num_heads, t, r), in = balanced_split(cfg.intermediate_size, t, r);
  const int64_t q = qh.size() * hd, kv = kv_heads_of_rank(cfg, t, r).size() * hd;
  const Range ei = expert_inter_of_rank(cfg, place), si = shared_expert_inter_of_rank(cfg, place);
  const int64_t held = experts_of_rank(cfg, place).size();
  const auto quantized = [&](const std::string& module) { return !qc.leaves_unquantized(module); };
  for (int64_t l = place.layers.begin; l < place.layers.end; ++l) {
    const LayerModules m(cfg, l);
    if (quantized(m.q)) quantized_slice(qc, q + 2 * kv, 0, H, H, 1, e, false);                      // q|k|v
    if (quantized(m.o)) quantized_slice(qc, H, qh.begin * hd, q, cfg.num_heads * hd, 1, e, false);  // o_proj
    if (!cfg.is_moe_layer(l)) {  // gate|up, down
      if (quantized(m.gate)) quantized_slice(qc, 2 * in.size(), 0, H, H, 1, e, false);
      if (quantized(m.down)) quantized_slice(qc, H, in.begin, in.size(), cfg.intermediate_size, 1, e, false);
      continue;
    }
    if (quantized(m.expert_gate)) quantized_slice(qc, 2 * ei.size(), 0, H, H, held, e, true);
    if (quantized(m.expert_down)) quantized_slice(qc, H, ei.begin, ei.size(), cfg.expert_intermediate_size, held, e, true);
    if (cfg.shared_expert_intermediate_size <= 0) continue;
    if (quantized(m.shared_gate)) quantized_slice(qc, 2 * si.size(), 0, H, H, 1, e, true);
    if (quantized(m.shared_down))
      quantized_slice(qc, H, si.begin, si.size(), cfg.shared_expert_intermediate_size, 1, e, true);
  }
}

ShardElements shard_elements(const ModelConfig& cfg, const ShardPlacement& place) {
  const int t = place.tensor, r = place.tp_rank;
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim;
  const int64_t q = balanced_split(cfg.num_heads, t, r).size() * hd;
  const int64_t kv = kv_heads_of_rank(cfg, t, r).size() * hd;
  const int64_t inter = balanced_split(cfg.intermediate_size, t, r).size();
  const int64_t vocab = balanced_split(cfg.vocab_size, t, r).size();
  const int64_t layers = place.layers.size();
  // Mixture-of-experts layers hold the replicated router [experts, H] and, of each expert the
  // rank holds (all under parallel.experts: tensor, a block under expert), its gate/up rows and
  // down columns (the whole expert under expert) instead of the dense MLP; Qwen2-MoE adds the
  // shared expert's gate row to the router and the rank's slice of the shared expert.
  int64_t moe_layers = 0;
  for (int64_t l = place.layers.begin; l < place.layers.end; ++l) moe_layers += cfg.is_moe_layer(l);
  const int64_t expert_inter = expert_inter_of_rank(cfg, place).size();
  const int64_t experts_held = experts_of_rank(cfg, place).size();
  const int64_t shared = cfg.shared_expert_intermediate_size > 0;
  const int64_t shared_inter = shared_expert_inter_of_rank(cfg, place).size();
  const int64_t moe_layer =
      (cfg.num_experts + shared) * H + experts_held * 3 * expert_inter * H + 3 * shared_inter * H;
  ShardElements e;
  e.linear = layers * ((q + 2 * kv) * H + H * q) + (layers - moe_layers) * 3 * inter * H + moe_layers * moe_layer;
  e.experts = moe_layers * moe_layer;
  int64_t per_layer_f32 = 2 * H;                   // input and post-attention norms
  if (cfg.sandwich_norms) per_layer_f32 += 2 * H;  // pre/post feed-forward norms (Gemma 2/3)
  if (cfg.qk_norm) per_layer_f32 += 2 * hd;        // per-head q/k norms (Qwen3, Gemma 3)
  if (cfg.attention_bias) {
    per_layer_f32 += q + 2 * kv;
    if (model_family(cfg.architecture).o_proj_bias) e.o_proj_bias = layers * H;
  }
  if (cfg.mlp_bias) per_layer_f32 += 2 * inter + H;  // gate/up slices, the whole down bias
  e.norms_biases = layers * per_layer_f32;
  e.rope_tables = (hd / 2) * (1 + (cfg.rope_local_theta > 0) + (rope_long_factors_after(cfg) > 0));
  const bool tied = cfg.tie_word_embeddings;
  if (place.has_embedding) e.linear += vocab * H;
  if (place.has_lm_head) {
    e.norms_biases += H;                                        // final norm
    if (!(tied && place.has_embedding)) e.linear += vocab * H;  // own LM head, or the tied table on a later stage
  }
  if (cfg.quantization.quantized()) count_quantized(cfg, place, e);
  return e;
}

}  // namespace

int64_t shard_weight_bytes(const ModelConfig& cfg, const ShardPlacement& place, DType weight_dtype) {
  const ShardElements e = shard_elements(cfg, place);
  return e.linear * static_cast<int64_t>(dtype_size(weight_dtype)) + e.quantized_bytes +
         (e.norms_biases + e.o_proj_bias + e.rope_tables + e.scales) * 4;
}

int64_t shard_expert_weight_bytes(const ModelConfig& cfg, const ShardPlacement& place, DType weight_dtype) {
  const ShardElements e = shard_elements(cfg, place);
  return e.experts * static_cast<int64_t>(dtype_size(weight_dtype)) + e.expert_quantized_bytes + e.expert_scales * 4;
}

int64_t shard_dequantize_scratch_bytes(const ModelConfig& cfg, const ShardPlacement& place) {
  return shard_elements(cfg, place).dequantize_scratch;
}

// Declared in model/llama_shard.h (for `plan`); defined here beside shard_weight_bytes, from the same count.
int64_t shard_parameter_count(const ModelConfig& cfg, const ShardPlacement& place) {
  const ShardElements e = shard_elements(cfg, place);
  return e.linear + e.quantized + e.norms_biases;
}

int64_t kv_bytes_per_token_of_rank(const ModelConfig& cfg, int tensor, int tp_rank, int64_t layers, DType kv_dtype) {
  const int64_t kv_heads = kv_heads_of_rank(cfg, tensor, tp_rank).size();
  return 2 * kv_heads * cfg.head_dim * static_cast<int64_t>(dtype_size(kv_dtype)) * layers;
}

}  // namespace tpbatch
