#include "model/llama_shard.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "model/model_family.h"
#include "model/rope_frequencies.h"
#include "model/weight_staging.h"

namespace tpbatch {
namespace {

std::string layer_name(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

// A sparse MoE block's router (whole) and, of the experts this rank holds (`held`: all of them
// under parallel.experts: tensor, a block under expert), its slice of each: gate and up rows
// [e0, e0 + ne) like the dense MLP's column split, down's columns likewise (row split); the whole
// width under expert. Every expert's shapes are checked on every rank, so all ranks name the same
// bad tensor. Mixtral names them block_sparse_moe.{gate, experts.J.w1 (gate), w3 (up), w2 (down)};
// Qwen3-MoE mlp.{gate, experts.J.gate_proj, up_proj, down_proj}; Qwen2-MoE adds
// mlp.shared_expert.{gate_proj, up_proj, down_proj} (sliced by `shared`) and
// mlp.shared_expert_gate, a row under the router's.
void load_experts(const ModelConfig& cfg, const WeightStore& w, int64_t layer, Range held, Range slice, Range shared,
                  WeightStaging& big, Backend& be, LayerShard& L) {
  const bool mixtral = model_family(cfg.architecture).moe == MoeRule::kMixtral;
  const std::string block = "model.layers." + std::to_string(layer) + (mixtral ? ".block_sparse_moe." : ".mlp.");
  const int64_t H = cfg.hidden_size, E = cfg.num_experts, I = cfg.expert_intermediate_size;
  const int64_t e0 = slice.begin, ne = slice.size();
  if (ne == 0)  // balanced_split gives some rank nothing only when the width is below the TP degree
    throw Error(std::string("the experts' FFN width ") + (mixtral ? "intermediate_size " : "moe_intermediate_size ") +
                std::to_string(I) + " is smaller than the tensor-parallel degree: every rank needs a slice of each expert "
                "(parallel.experts: expert keeps experts whole)");
  w.expect_shape(block + "gate.weight", {E, H});
  const int64_t SI = cfg.shared_expert_intermediate_size;
  if (SI > 0) {
    const std::string se = block + "shared_expert.";
    w.expect_shape(block + "shared_expert_gate.weight", {1, H});
    w.expect_shape(se + "gate_proj.weight", {SI, H});
    w.expect_shape(se + "up_proj.weight", {SI, H});
    w.expect_shape(se + "down_proj.weight", {H, SI});
    if (shared.size() == 0)
      throw Error("the shared expert's width shared_expert_intermediate_size " + std::to_string(SI) +
                  " is smaller than the tensor-parallel degree: every rank needs a slice of it");
    L.router = big.rows(block + "gate.weight", 0, E, 0, H).rows(block + "shared_expert_gate.weight", 0, 1, 0, H).upload_linear(be);
    L.shared_gu = big.rows(se + "gate_proj.weight", shared.begin, shared.size(), 0, H)
                      .rows(se + "up_proj.weight", shared.begin, shared.size(), 0, H)
                      .upload_linear(be);
    L.shared_down = big.rows(se + "down_proj.weight", 0, H, shared.begin, shared.size()).upload_linear(be);
  } else {
    L.router = big.rows(block + "gate.weight", 0, E, 0, H).upload_linear(be);
  }
  for (int64_t e = 0; e < E; ++e) {
    const std::string p = block + "experts." + std::to_string(e) + ".";
    const std::string gate = p + (mixtral ? "w1.weight" : "gate_proj.weight");
    const std::string up = p + (mixtral ? "w3.weight" : "up_proj.weight");
    const std::string down = p + (mixtral ? "w2.weight" : "down_proj.weight");
    w.expect_shape(gate, {I, H});
    w.expect_shape(up, {I, H});
    w.expect_shape(down, {H, I});
    if (e < held.begin || e >= held.end) continue;
    L.expert_gu.push_back(big.rows(gate, e0, ne, 0, H).rows(up, e0, ne, 0, H).upload_linear(be));
    L.expert_down.push_back(big.rows(down, 0, H, e0, ne).upload_linear(be));
  }
}

}  // namespace

size_t LlamaShard::weight_bytes() const {
  size_t n = embedding.bytes() + lm_head.bytes() + final_norm.bytes();
  n += inv_freq.bytes() + inv_freq_local.bytes();
  for (const auto& l : layers)
    n += l.input_norm.bytes() + l.post_norm.bytes() + l.wqkv.bytes() + l.bqkv.bytes() + l.wo.bytes() + l.wgu.bytes() +
         l.wdown.bytes() + l.bo.bytes() + l.pre_ffn_norm.bytes() + l.post_ffn_norm.bytes() + l.q_norm.bytes() +
         l.k_norm.bytes() + l.bgu.bytes() + l.bdown.bytes() + l.router.bytes() + l.shared_gu.bytes() +
         l.shared_down.bytes();
  for (const auto& l : layers)
    for (size_t e = 0; e < l.expert_gu.size(); ++e) n += l.expert_gu[e].bytes() + l.expert_down[e].bytes();
  return n;
}

namespace {

// This rank's heads, FFN columns, vocabulary rows and experts (model/shard_ranges.h).
void assign_ranges(const ModelConfig& cfg, const ShardPlacement& place, LlamaShard& s) {
  const int t = place.tensor, r = place.tp_rank;
  s.q_head_range = balanced_split(cfg.num_heads, t, r);
  s.kv_head_range = kv_heads_of_rank(cfg, t, r);
  s.inter_range = balanced_split(cfg.intermediate_size, t, r);
  s.vocab_range = balanced_split(cfg.vocab_size, t, r);
  s.q_heads = s.q_head_range.size();
  s.kv_heads = s.kv_head_range.size();
  s.inter = s.inter_range.size();
  s.expert_inter_range = expert_inter_of_rank(cfg, place);
  s.expert_inter = cfg.num_experts > 0 ? s.expert_inter_range.size() : 0;
  s.expert_range = cfg.num_experts > 0 ? experts_of_rank(cfg, place) : Range{};
  s.shared_inter_range = shared_expert_inter_of_rank(cfg, place);
  for (int i = 0; i < t; ++i) s.vocab_shard_max = std::max(s.vocab_shard_max, balanced_split(cfg.vocab_size, t, i).size());
}

// RoPE's inverse frequencies (the long factors appended when the model has them; the local
// layers' own table when they turn at another base).
void upload_rope_tables(const ModelConfig& cfg, Backend& be, LlamaShard& s) {
  auto upload_freqs = [&](const std::vector<double>& freqs) {
    std::vector<float> inv;
    for (double f : freqs) inv.push_back(static_cast<float>(f));
    Buffer b = be.alloc(inv.size(), DType::F32);
    be.upload(b.view(), inv.data(), inv.size() * sizeof(float));
    return b;
  };
  std::vector<double> freqs = rope_inverse_frequencies(cfg);
  if (rope_long_factors_after(cfg) > 0) {
    const std::vector<double> long_freqs = rope_long_inverse_frequencies(cfg);
    freqs.insert(freqs.end(), long_freqs.begin(), long_freqs.end());
  }
  s.inv_freq = upload_freqs(freqs);
  if (cfg.rope_local_theta > 0) s.inv_freq_local = upload_freqs(rope_local_inverse_frequencies(cfg));
}

// The vocabulary rows of the embedding (first stage, or the last when the LM head is tied to it),
// the LM head and the final norm (last stage).
void load_embedding_and_head(const ModelConfig& cfg, const WeightStore& w, const ShardPlacement& place,
                             WeightStaging& big, WeightStaging& small, Backend& be, LlamaShard& s) {
  const int64_t V = cfg.vocab_size, H = cfg.hidden_size;
  const bool lm_head_tied = cfg.tie_word_embeddings || !w.has("lm_head.weight");
  const float norm_offset = cfg.norm_plus_one ? 1.0f : 0.0f;
  if (place.has_embedding || (place.has_lm_head && lm_head_tied)) {
    w.expect_shape("model.embed_tokens.weight", {V, H});
    s.embedding = big.rows("model.embed_tokens.weight", s.vocab_range.begin, s.vocab_range.size(), 0, H).upload(be);
  }
  if (place.has_lm_head) {
    if (!lm_head_tied) {
      w.expect_shape("lm_head.weight", {V, H});
      s.lm_head = big.rows("lm_head.weight", s.vocab_range.begin, s.vocab_range.size(), 0, H).upload(be);
    }
    w.expect_shape("model.norm.weight", {H});
    s.final_norm = small.all("model.norm.weight", H).plus(norm_offset).upload(be);
  }
}

// Where this rank's slice of one layer's projections lies: q and kv rows (times head_dim), FFN
// columns, and the whole q and kv widths.
struct LayerSlices {
  int64_t q0, nq, k0, nk, i0, ni, Q, KV;
};

LayerSlices layer_slices(const ModelConfig& cfg, const LlamaShard& s) {
  const int64_t hd = cfg.head_dim;
  return LayerSlices{s.q_head_range.begin * hd, s.q_heads * hd,  s.kv_head_range.begin * hd, s.kv_heads * hd,
                     s.inter_range.begin,       s.inter,         cfg.num_heads * hd,         cfg.num_kv_heads * hd};
}

// q, k, v in one column-split GEMM and gate, up in another (Phi-3: already fused in the file), or
// the layer's experts.
void load_qkv_and_gate_up(const ModelConfig& cfg, const WeightStore& w, int64_t layer, const LlamaShard& s,
                            WeightStaging& big, Backend& be, LayerShard& L) {
  auto name = [&](const char* suffix) { return layer_name(layer, suffix); };
  const int64_t H = cfg.hidden_size, I = cfg.intermediate_size;
  const LayerSlices c = layer_slices(cfg, s);
  if (cfg.fused_projections) {  // Phi-3: [q | k | v] and [gate | up] rows in one tensor each
    const std::string qkv = name("self_attn.qkv_proj.weight"), gu = name("mlp.gate_up_proj.weight");
    w.expect_shape(qkv, {c.Q + 2 * c.KV, H});
    w.expect_shape(gu, {2 * I, H});
    L.wqkv = big.rows(qkv, c.q0, c.nq, 0, H).rows(qkv, c.Q + c.k0, c.nk, 0, H).rows(qkv, c.Q + c.KV + c.k0, c.nk, 0, H).upload_linear(be);
    L.wgu = big.rows(gu, c.i0, c.ni, 0, H).rows(gu, I + c.i0, c.ni, 0, H).upload_linear(be);
    return;
  }
  w.expect_shape(name("self_attn.q_proj.weight"), {c.Q, H});
  w.expect_shape(name("self_attn.k_proj.weight"), {c.KV, H});
  w.expect_shape(name("self_attn.v_proj.weight"), {c.KV, H});
  L.wqkv = big.rows(name("self_attn.q_proj.weight"), c.q0, c.nq, 0, H)
               .rows(name("self_attn.k_proj.weight"), c.k0, c.nk, 0, H)
               .rows(name("self_attn.v_proj.weight"), c.k0, c.nk, 0, H)
               .upload_linear(be);
  if (cfg.is_moe_layer(layer)) {
    load_experts(cfg, w, layer, s.expert_range, s.expert_inter_range, s.shared_inter_range, big, be, L);
  } else {
    w.expect_shape(name("mlp.gate_proj.weight"), {I, H});
    w.expect_shape(name("mlp.up_proj.weight"), {I, H});
    L.wgu = big.rows(name("mlp.gate_proj.weight"), c.i0, c.ni, 0, H).rows(name("mlp.up_proj.weight"), c.i0, c.ni, 0, H).upload_linear(be);
  }
}

// The attention and MLP biases the family has, sliced as their weights.
void load_biases(const ModelConfig& cfg, const WeightStore& w, int64_t layer, const LlamaShard& s,
                 WeightStaging& small, Backend& be, LayerShard& L) {
  auto name = [&](const char* suffix) { return layer_name(layer, suffix); };
  const int64_t H = cfg.hidden_size, I = cfg.intermediate_size;
  const LayerSlices c = layer_slices(cfg, s);
  if (cfg.attention_bias) {
    w.expect_shape(name("self_attn.q_proj.bias"), {c.Q});
    w.expect_shape(name("self_attn.k_proj.bias"), {c.KV});
    w.expect_shape(name("self_attn.v_proj.bias"), {c.KV});
    L.bqkv = small.rows(name("self_attn.q_proj.bias"), 0, 1, c.q0, c.nq)
                 .rows(name("self_attn.k_proj.bias"), 0, 1, c.k0, c.nk)
                 .rows(name("self_attn.v_proj.bias"), 0, 1, c.k0, c.nk)
                 .upload(be);
  }
  if (cfg.attention_bias && w.has(name("self_attn.o_proj.bias"))) {  // Llama's attention_bias; Qwen2 has none
    w.expect_shape(name("self_attn.o_proj.bias"), {H});
    L.bo = small.all(name("self_attn.o_proj.bias"), H).upload(be);
  }
  if (cfg.mlp_bias) {
    w.expect_shape(name("mlp.gate_proj.bias"), {I});
    w.expect_shape(name("mlp.up_proj.bias"), {I});
    w.expect_shape(name("mlp.down_proj.bias"), {H});
    L.bgu = small.rows(name("mlp.gate_proj.bias"), 0, 1, c.i0, c.ni).rows(name("mlp.up_proj.bias"), 0, 1, c.i0, c.ni).upload(be);
    L.bdown = small.all(name("mlp.down_proj.bias"), H).upload(be);
  }
}

// One decoder layer's norms, projections and biases; shapes are checked in the same order on
// every rank, so all ranks name the same bad tensor.
LayerShard load_layer(const ModelConfig& cfg, const WeightStore& w, int64_t layer, const LlamaShard& s,
                      WeightStaging& big, WeightStaging& small, Backend& be) {
  LayerShard L;
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim, I = cfg.intermediate_size;
  const float norm_offset = cfg.norm_plus_one ? 1.0f : 0.0f;
  auto name = [&](const char* suffix) { return layer_name(layer, suffix); };
  auto norm = [&](const char* suffix, int64_t n) {
    w.expect_shape(name(suffix), {n});
    return small.all(name(suffix), n).plus(norm_offset).upload(be);
  };
  L.input_norm = norm("input_layernorm.weight", H);
  L.post_norm = norm("post_attention_layernorm.weight", H);
  if (cfg.sandwich_norms) {
    L.pre_ffn_norm = norm("pre_feedforward_layernorm.weight", H);
    L.post_ffn_norm = norm("post_feedforward_layernorm.weight", H);
  }
  if (cfg.qk_norm) {
    L.q_norm = norm("self_attn.q_norm.weight", hd);
    L.k_norm = norm("self_attn.k_norm.weight", hd);
  }
  const LayerSlices c = layer_slices(cfg, s);
  w.expect_shape(name("self_attn.o_proj.weight"), {H, c.Q});
  const bool moe = cfg.is_moe_layer(layer);
  if (!moe) w.expect_shape(name("mlp.down_proj.weight"), {H, I});
  load_qkv_and_gate_up(cfg, w, layer, s, big, be, L);
  load_biases(cfg, w, layer, s, small, be, L);
  L.wo = big.rows(name("self_attn.o_proj.weight"), 0, H, c.q0, c.nq).upload_linear(be);
  if (!moe) L.wdown = big.rows(name("mlp.down_proj.weight"), 0, H, c.i0, c.ni).upload_linear(be);
  return L;
}

}  // namespace

LlamaShard load_llama_shard(const ModelConfig& cfg, const WeightStore& w, const ShardPlacement& place, Backend& be,
                            DType wt) {
  LlamaShard s;
  s.config = cfg;
  s.placement = place;
  s.weight_dtype = wt;
  assign_ranges(cfg, place, s);
  upload_rope_tables(cfg, be, s);
  WeightStaging big(w, wt, cfg.quantization), small(w, DType::F32, cfg.quantization);
  load_embedding_and_head(cfg, w, place, big, small, be, s);
  for (int64_t layer = place.layers.begin; layer < place.layers.end; ++layer)
    s.layers.push_back(load_layer(cfg, w, layer, s, big, small, be));
  return s;
}

}  // namespace tpbatch
