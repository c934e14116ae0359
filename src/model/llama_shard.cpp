#include "model/llama_shard.h"

#include <string>

#include "common/error.h"

namespace tpbatch {
namespace {

std::string layer_name(int64_t layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

// Appends rows [row0, row0+nrows) x all columns of a 2-D tensor to out.
void append_rows(const WeightStore& w, const std::string& name, int64_t row0, int64_t nrows, int64_t cols,
                 std::vector<float>& out) {
  const size_t at = out.size();
  out.resize(at + static_cast<size_t>(nrows * cols));
  w.read_f32(name, row0, nrows, 0, cols, out.data() + at);
}

}  // namespace

size_t LlamaShard::weight_bytes() const {
  size_t n = embedding.size() + lm_head.size() + final_norm.size();
  for (const auto& l : layers)
    n += l.input_norm.size() + l.post_norm.size() + l.wqkv.size() + l.bqkv.size() + l.wo.size() + l.wgu.size() +
         l.wdown.size() + l.bo.size();
  return n * sizeof(float);
}

LlamaShard load_llama_shard(const ModelConfig& cfg, const WeightStore& w, const ShardPlacement& place) {
  LlamaShard s;
  s.config = cfg;
  s.placement = place;
  const int t = place.tensor, r = place.tp_rank;
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim;
  s.q_head_range = balanced_split(cfg.num_heads, t, r);
  s.kv_head_range = kv_heads_of_rank(cfg, t, r);
  s.inter_range = balanced_split(cfg.intermediate_size, t, r);
  s.vocab_range = balanced_split(cfg.vocab_size, t, r);
  s.q_heads = s.q_head_range.size();
  s.kv_heads = s.kv_head_range.size();
  s.inter = s.inter_range.size();
  for (int i = 0; i < t; ++i) s.vocab_shard_max = std::max(s.vocab_shard_max, balanced_split(cfg.vocab_size, t, i).size());
  for (double f : rope_inverse_frequencies(cfg)) s.inv_freq.push_back(static_cast<float>(f));

  const int64_t V = cfg.vocab_size, I = cfg.intermediate_size;
  const bool lm_head_tied = cfg.tie_word_embeddings || !w.has("lm_head.weight");
  if (place.has_embedding || (place.has_lm_head && lm_head_tied)) {
    w.expect_shape("model.embed_tokens.weight", {V, H});
    append_rows(w, "model.embed_tokens.weight", s.vocab_range.begin, s.vocab_range.size(), H, s.embedding);
  }
  if (place.has_lm_head) {
    if (!lm_head_tied) {
      w.expect_shape("lm_head.weight", {V, H});
      append_rows(w, "lm_head.weight", s.vocab_range.begin, s.vocab_range.size(), H, s.lm_head);
    }
    w.expect_shape("model.norm.weight", {H});
    append_rows(w, "model.norm.weight", 0, 1, H, s.final_norm);
  }

  for (int64_t layer = place.layers.begin; layer < place.layers.end; ++layer) {
    LayerShard L;
    auto name = [&](const char* suffix) { return layer_name(layer, suffix); };
    w.expect_shape(name("input_layernorm.weight"), {H});
    w.expect_shape(name("post_attention_layernorm.weight"), {H});
    w.expect_shape(name("self_attn.q_proj.weight"), {cfg.num_heads * hd, H});
    w.expect_shape(name("self_attn.k_proj.weight"), {cfg.num_kv_heads * hd, H});
    w.expect_shape(name("self_attn.v_proj.weight"), {cfg.num_kv_heads * hd, H});
    w.expect_shape(name("self_attn.o_proj.weight"), {H, cfg.num_heads * hd});
    w.expect_shape(name("mlp.gate_proj.weight"), {I, H});
    w.expect_shape(name("mlp.up_proj.weight"), {I, H});
    w.expect_shape(name("mlp.down_proj.weight"), {H, I});
    append_rows(w, name("input_layernorm.weight"), 0, 1, H, L.input_norm);
    append_rows(w, name("post_attention_layernorm.weight"), 0, 1, H, L.post_norm);

    const int64_t q0 = s.q_head_range.begin * hd, nq = s.q_heads * hd;
    const int64_t k0 = s.kv_head_range.begin * hd, nk = s.kv_heads * hd;
    append_rows(w, name("self_attn.q_proj.weight"), q0, nq, H, L.wqkv);
    append_rows(w, name("self_attn.k_proj.weight"), k0, nk, H, L.wqkv);
    append_rows(w, name("self_attn.v_proj.weight"), k0, nk, H, L.wqkv);
    if (cfg.attention_bias) {
      w.expect_shape(name("self_attn.q_proj.bias"), {cfg.num_heads * hd});
      w.expect_shape(name("self_attn.k_proj.bias"), {cfg.num_kv_heads * hd});
      w.expect_shape(name("self_attn.v_proj.bias"), {cfg.num_kv_heads * hd});
      L.bqkv.resize(nq + 2 * nk);
      w.read_f32(name("self_attn.q_proj.bias"), 0, 1, q0, nq, L.bqkv.data());
      w.read_f32(name("self_attn.k_proj.bias"), 0, 1, k0, nk, L.bqkv.data() + nq);
      w.read_f32(name("self_attn.v_proj.bias"), 0, 1, k0, nk, L.bqkv.data() + nq + nk);
    }
    if (cfg.attention_bias && w.has(name("self_attn.o_proj.bias"))) {  // Llama's attention_bias; Qwen2 has none
      w.expect_shape(name("self_attn.o_proj.bias"), {H});
      append_rows(w, name("self_attn.o_proj.bias"), 0, 1, H, L.bo);
    }
    L.wo.resize(H * nq);
    w.read_f32(name("self_attn.o_proj.weight"), 0, H, q0, nq, L.wo.data());

    append_rows(w, name("mlp.gate_proj.weight"), s.inter_range.begin, s.inter, H, L.wgu);
    append_rows(w, name("mlp.up_proj.weight"), s.inter_range.begin, s.inter, H, L.wgu);
    L.wdown.resize(H * s.inter);
    w.read_f32(name("mlp.down_proj.weight"), 0, H, s.inter_range.begin, s.inter, L.wdown.data());
    s.layers.push_back(std::move(L));
  }
  return s;
}

int64_t shard_parameter_count(const ModelConfig& cfg, const ShardPlacement& place) {
  const int t = place.tensor, r = place.tp_rank;
  const int64_t H = cfg.hidden_size, hd = cfg.head_dim;
  const int64_t q = balanced_split(cfg.num_heads, t, r).size() * hd;
  const int64_t kv = kv_heads_of_rank(cfg, t, r).size() * hd;
  const int64_t inter = balanced_split(cfg.intermediate_size, t, r).size();
  const int64_t vocab = balanced_split(cfg.vocab_size, t, r).size();
  int64_t per_layer = 2 * H + (q + 2 * kv) * H + H * q + 3 * inter * H;
  if (cfg.attention_bias) per_layer += q + 2 * kv;
  int64_t n = per_layer * place.layers.size();
  const bool tied = cfg.tie_word_embeddings;
  if (place.has_embedding) n += vocab * H;
  if (place.has_lm_head) n += H + ((tied && place.has_embedding) ? 0 : vocab * H);
  return n;
}

}  // namespace tpbatch
