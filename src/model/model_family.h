#pragma once
// The model families: one row per config.json `architectures` name, with what the family fixes
// (its defaults, which optional keys it reads, its layer features). Config parsing, weight loading
// and the plan read a family's features here instead of comparing architecture names.
#include <string>
#include <string_view>
#include <vector>

namespace tpbatch {

// Where a family's q/k/v biases come from.
enum class AttentionBiasRule {
  kFromConfig,  // attention_bias (default false)
  kAlways,      // always present (Qwen2)
  kFromQkvBias, // qkv_bias (default true; Qwen2-MoE)
  kNone,        // never; attention_bias: true is refused
};

// Which layers attend through a sliding window, and the keys that say so.
enum class WindowRule {
  kNone,         // no window (sliding_window is ignored)
  kEveryLayer,   // sliding_window on every layer (Mistral, Phi-3, Mixtral)
  kAlternating,  // Gemma 2: sliding_window on even layers (or as layer_types says)
  kPattern,      // Gemma 3: all but every sliding_window_pattern-th layer (or as layer_types says)
  kQwen,         // use_sliding_window with sliding_window, from max_window_layers on
};

// The mixture-of-experts block and its config keys.
enum class MoeRule {
  kDense,     // no experts
  kMixtral,   // num_local_experts, every layer sparse, block_sparse_moe tensors
  kQwen3Moe,  // num_experts, moe_intermediate_size, decoder_sparse_step, mlp_only_layers
  kQwen2Moe,  // as Qwen3-MoE, plus a sigmoid-gated shared expert
};

struct ModelFamily {
  const char* architecture;           // config.json's architectures[0]
  const char* model_type;             // when config.json has none
  const char* activation;             // the MLP activation when the config names none
  bool gemma_activation_keys = false; // reads hidden_activation before hidden_act
  bool gemma1_gelu = false;           // hidden_act without hidden_activation is gelu_pytorch_tanh
  bool mlp_bias = false;              // mlp_bias: true is allowed
  AttentionBiasRule attention_bias = AttentionBiasRule::kFromConfig;
  bool o_proj_bias = false;           // attention_bias also biases o_proj (when the checkpoint has it)
  bool tied_embeddings = false;       // tie_word_embeddings' default
  bool fused_projections = false;     // qkv_proj and gate_up_proj tensors (Phi-3)
  bool qk_norm = false;               // per-head q/k RMSNorm before RoPE
  bool gemma_norms = false;           // (1 + weight) norms and embeddings scaled by sqrt(hidden_size)
  bool sandwich_norms = false;        // norms around attention and MLP, query_pre_attn_scalar, soft caps
  bool local_rope_base = false;       // rope_local_base_freq for the sliding layers
  WindowRule window = WindowRule::kNone;
  MoeRule moe = MoeRule::kDense;
};

// Every supported family, in the order messages list them.
const std::vector<ModelFamily>& model_families();

// The family of an architecture name; null when unsupported.
const ModelFamily* find_model_family(std::string_view architecture);

// The family of a name a ModelConfig was parsed with (throws Error for an unknown one).
const ModelFamily& model_family(std::string_view architecture);

// "LlamaForCausalLM, ..." for messages: the table's names.
std::string supported_architectures();

}  // namespace tpbatch
