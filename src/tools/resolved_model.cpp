#include "tools/resolved_model.h"

#include <string>

#include "common/error.h"

namespace tpbatch {
namespace {

// The preset's shape (its dtype into preset_dtype), then the options that override it, checked.
void resolve_shape(const MakeModelOptions& o, ResolvedModel& r, std::string& preset_dtype) {
  if (o.preset == "tiny") {
    r.hidden = 64, r.intermediate = 172, r.layers = 5, r.heads = 8, r.kv_heads = 4, r.vocab = 512, r.max_pos = 512;
    r.tied = true;
  } else if (o.preset == "125m") {
    r.hidden = 768, r.intermediate = 2048, r.layers = 12, r.heads = 12, r.kv_heads = 4, r.vocab = 32000, r.max_pos = 2048;
    r.tied = false;
  } else if (o.preset == "8b") {
    r.hidden = 4096, r.intermediate = 14336, r.layers = 32, r.heads = 32, r.kv_heads = 8, r.vocab = 128256, r.max_pos = 8192;
    r.tied = false;
    r.rope_theta = 500000.0;
    preset_dtype = "bfloat16";
  } else {
    throw Error("make-model: unknown preset '" + o.preset + "' (tiny, 125m, 8b)");
  }
  auto over = [](int64_t& field, int64_t value, const char* name) {
    if (value == -1) return;
    if (value <= 0) throw Error(std::string("make-model: ") + name + " must be positive, got " + std::to_string(value));
    field = value;
  };
  over(r.hidden, o.hidden_size, "hidden_size");
  over(r.intermediate, o.intermediate_size, "intermediate_size");
  over(r.layers, o.num_layers, "num_layers");
  over(r.heads, o.num_heads, "num_heads");
  over(r.kv_heads, o.num_kv_heads, "num_kv_heads");
  over(r.vocab, o.vocab_size, "vocab_size");
  over(r.max_pos, o.max_position_embeddings, "max_position_embeddings");
  if (o.head_dim != -1) {
    if (o.head_dim <= 0) throw Error("make-model: head_dim must be positive, got " + std::to_string(o.head_dim));
    r.head_dim = o.head_dim;
  } else {
    if (r.hidden % r.heads != 0)
      throw Error("make-model: num_heads " + std::to_string(r.heads) + " does not divide hidden_size " + std::to_string(r.hidden));
    r.head_dim = r.hidden / r.heads;
  }
  if (r.head_dim % 2 != 0) throw Error("make-model: head_dim must be even, got " + std::to_string(r.head_dim));
  if (r.heads % r.kv_heads != 0)
    throw Error("make-model: num_heads " + std::to_string(r.heads) + " is not a multiple of num_kv_heads " +
                std::to_string(r.kv_heads));
  if (o.tie_word_embeddings != -1) r.tied = o.tie_word_embeddings != 0;
}

// The 8b preset is bf16 unless asked otherwise ("float32" is the options' default, and a 32 GB f32
// 8B model is never what is wanted); "auto" or "" = the preset's dtype.
void resolve_dtype(const MakeModelOptions& o, ResolvedModel& r, const std::string& preset_dtype) {
  r.dtype = o.dtype;
  if (r.dtype.empty() || r.dtype == "auto" || (o.preset == "8b" && r.dtype == "float32")) r.dtype = preset_dtype;
  if (r.dtype == "f32" || r.dtype == "fp32") r.dtype = "float32";
  if (r.dtype == "bf16") r.dtype = "bfloat16";
  if (r.dtype == "f16" || r.dtype == "fp16") r.dtype = "float16";
  if (r.dtype != "float32" && r.dtype != "bfloat16" && r.dtype != "float16")
    throw Error("make-model: unknown dtype '" + o.dtype + "' (float32, bfloat16, float16)");
}

// The mixture-of-experts families: Mixtral (every layer, the dense width per expert) and the
// Qwen3- / Qwen2-MoE keys (with dense layers, and Qwen2-MoE's shared expert).
void resolve_experts(const MakeModelOptions& o, ResolvedModel& r) {
  r.mixtral = r.architecture == "MixtralForCausalLM";
  r.qwen_moe = !r.mixtral;
  r.qwen2_moe = r.architecture == "Qwen2MoeForCausalLM";
  r.model_type = r.mixtral ? "mixtral" : r.qwen2_moe ? "qwen2_moe" : "qwen3_moe";
  r.qk_norm = r.qwen_moe && !r.qwen2_moe;
  r.rms_norm_eps = 1e-6;
  if (o.attention_bias && r.mixtral) throw Error("make-model: MixtralForCausalLM has no attention biases");
  r.attention_bias = o.attention_bias || r.qwen2_moe;  // Qwen2-MoE: q/k/v biases, as Qwen2
  if (o.num_experts <= 0 || o.experts_per_token <= 0 || o.experts_per_token > o.num_experts)
    throw Error("make-model: need 0 < experts per token (" + std::to_string(o.experts_per_token) +
                ") <= experts (" + std::to_string(o.num_experts) + ")");
  if (o.moe_intermediate_size <= 0) throw Error("make-model: moe_intermediate_size must be positive");
  r.experts = o.num_experts, r.top_k = o.experts_per_token;
  r.moe_inter = r.mixtral ? r.intermediate : o.moe_intermediate_size;
  r.shared_inter = r.qwen2_moe ? 4 * r.moe_inter : 0;  // Qwen1.5-MoE-A2.7B's ratio (5632 / 1408)
  r.norm_topk_prob = r.mixtral || o.norm_topk_prob;
  if (r.mixtral && !o.mlp_only_layers.empty()) throw Error("make-model: MixtralForCausalLM has no dense layers");
  for (int64_t l : o.mlp_only_layers)
    if (l < 0 || l >= r.layers) throw Error("make-model: mlp_only_layers entry " + std::to_string(l) + " is not a layer");
  r.mlp_only_layers = o.mlp_only_layers;
}

// The architecture's model_type and the features of its family.
void resolve_architecture(const MakeModelOptions& o, ResolvedModel& r) {
  r.architecture = o.architecture;
  if (r.architecture == "LlamaForCausalLM") {
    r.model_type = "llama";
    r.attention_bias = o.attention_bias;
  } else if (r.architecture == "MistralForCausalLM") {
    r.model_type = "mistral";
    if (o.attention_bias) throw Error("make-model: MistralForCausalLM has no attention biases");
  } else if (r.architecture == "Qwen2ForCausalLM") {
    r.model_type = "qwen2";
    r.attention_bias = true;
    r.rms_norm_eps = 1e-6;
  } else if (r.architecture == "Qwen3ForCausalLM") {
    r.model_type = "qwen3";
    r.attention_bias = o.attention_bias;
    r.qk_norm = true;
    r.rms_norm_eps = 1e-6;
  } else if (r.architecture == "Phi3ForCausalLM") {
    r.model_type = "phi3";
    r.fused = true;
    if (o.attention_bias) throw Error("make-model: Phi3ForCausalLM has no attention biases");
  } else if (r.architecture == "GemmaForCausalLM" || r.architecture == "Gemma2ForCausalLM" ||
             r.architecture == "Gemma3ForCausalLM") {
    r.model_type = r.architecture == "GemmaForCausalLM"    ? "gemma"
                   : r.architecture == "Gemma2ForCausalLM" ? "gemma2"
                                                           : "gemma3_text";
    r.gemma = true;
    r.sandwich = r.architecture != "GemmaForCausalLM";
    r.qk_norm = r.architecture == "Gemma3ForCausalLM";
    r.rms_norm_eps = 1e-6;
    if (o.tie_word_embeddings == -1) r.tied = true;
    if (o.attention_bias) throw Error("make-model: " + r.architecture + " has no attention biases");
  } else if (r.architecture == "MixtralForCausalLM" || r.architecture == "Qwen3MoeForCausalLM" ||
             r.architecture == "Qwen2MoeForCausalLM") {
    resolve_experts(o, r);
  } else {
    throw Error("make-model: unknown architecture '" + r.architecture +
                "' (LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Phi3ForCausalLM, "
                "GemmaForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, MixtralForCausalLM, Qwen3MoeForCausalLM, "
                "Qwen2MoeForCausalLM)");
  }
}

}  // namespace

ResolvedModel resolve_model(const MakeModelOptions& o) {
  ResolvedModel r;
  std::string preset_dtype = "float32";
  resolve_shape(o, r, preset_dtype);
  resolve_dtype(o, r, preset_dtype);
  resolve_architecture(o, r);
  r.rope_scaling = o.rope_scaling.empty() ? "none" : o.rope_scaling;
  if (r.rope_scaling != "none" && r.rope_scaling != "llama3")
    throw Error("make-model: unknown rope_scaling '" + o.rope_scaling + "' (none, llama3)");
  if (r.vocab < 260)
    throw Error("make-model: vocab_size " + std::to_string(r.vocab) + " is too small (at least 260 for the tokenizer)");
  return r;
}

}  // namespace tpbatch
