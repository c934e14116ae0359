#pragma once
// config.json (+ generation_config.json) of a Hugging Face decoder-only model folder.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/model_family.h"  // supported_architectures()
#include "model/quantization.h"

namespace tpbatch {

struct RopeScaling {
  std::string type = "none";                // none | linear | llama3 | yarn | dynamic | longrope
  double factor = 1.0;                      // linear, llama3, yarn, dynamic
  double low_freq_factor = 1.0;             // llama3
  double high_freq_factor = 4.0;            // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3, yarn (else max_position_embeddings), longrope
  double beta_fast = 32.0, beta_slow = 1.0; // yarn
  double mscale = 0.0, mscale_all_dim = 0.0;  // yarn (DeepSeek-style attention factor; 0 = unset)
  bool truncate = true;                     // yarn: round the correction range to whole dimensions
  double attention_factor = 0.0;            // yarn, longrope: explicit attention factor (0 = derived)
  std::vector<double> short_factor, long_factor;  // longrope: per-frequency divisors (head_dim / 2 each)
};

struct ModelConfig {
  std::string architecture;                 // see supported_architectures()
  std::string model_type;                   // llama | mistral | qwen2 | qwen3 | phi3 | gemma | gemma2 | gemma3_text |
                                            // mixtral | qwen3_moe | qwen2_moe
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;                     // config's head_dim, else hidden_size / num_heads
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  QuantizationConfig quantization;          // quantization_config; method empty when there is none
  bool attention_bias = false;              // q/k/v biases (Qwen2)
  bool mlp_bias = false;                    // gate/up/down biases (Llama's mlp_bias)
  int64_t sliding_window = 0;               // 0 = none
  // Layers that use sliding_window (empty = all of them, when sliding_window > 0): Gemma 2/3
  // alternate local (windowed) and global layers.
  std::vector<bool> sliding_layers;
  std::string hidden_act = "silu";          // silu | gelu_pytorch_tanh (gated MLP activation)
  bool fused_projections = false;           // Phi-3: qkv_proj and gate_up_proj tensors
  bool qk_norm = false;                     // Qwen3, Gemma 3: per-head RMSNorm of q and k before RoPE
  bool norm_plus_one = false;               // Gemma: RMSNorm scales by (1 + weight)
  bool sandwich_norms = false;              // Gemma 2/3: norms after attention and MLP too, and before the MLP
  double embedding_scale = 0.0;             // Gemma: embeddings times sqrt(hidden_size); 0 = none
  double query_pre_attn_scalar = 0.0;       // Gemma: scores scaled by its -1/2 power instead of head_dim's; 0 = none
  double attn_logit_softcap = 0.0;          // Gemma 2: scores = cap * tanh(scores / cap); 0 = none
  double final_logit_softcap = 0.0;         // Gemma 2: logits likewise
  double rope_local_theta = 0.0;            // Gemma 3: rope base of the sliding layers (unscaled); 0 = as global
  // Mixture of experts (Mixtral, Qwen3-MoE). num_experts 0 = a dense MLP on every layer.
  int64_t num_experts = 0;                  // Mixtral's num_local_experts, Qwen3-MoE's num_experts
  int64_t experts_per_token = 0;            // num_experts_per_tok: the router's top-k
  int64_t expert_intermediate_size = 0;     // each expert's FFN width (Mixtral: intermediate_size;
                                            // Qwen3-MoE: moe_intermediate_size)
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE: a sigmoid-gated dense expert every token
                                                // passes through beside the routed ones; 0 = none
  bool norm_topk_prob = true;               // renormalise the top-k softmax weights to sum 1 (Mixtral: always)
  // Per layer: a sparse MoE block (true) or the dense MLP of intermediate_size (Qwen3-MoE's
  // decoder_sparse_step and mlp_only_layers). Empty when num_experts is 0.
  std::vector<bool> moe_layers;
  bool is_moe_layer(int64_t layer) const {
    return num_experts > 0 && layer >= 0 && layer < int64_t(moe_layers.size()) && moe_layers[size_t(layer)];
  }
  int32_t bos_token_id = -1;                // -1 = none
  std::vector<int32_t> eos_token_ids;       // config's and generation_config's, deduplicated
  std::string torch_dtype = "float32";
};

// Reads and validates model_dir/config.json and (if present) generation_config.json.
// Throws tpbatch::Error (exit 1) naming the file, the key and the reason: missing folder or file,
// unknown architecture, unsupported option (e.g. hidden_act other than silu), inconsistent shapes.
ModelConfig load_model_config(const std::filesystem::path& model_dir);
ModelConfig parse_model_config(const std::string& config_json_text, const std::string& generation_json_text,
                               const std::string& label);

// Does layer `layer` attend through the sliding window?
int64_t layer_window(const ModelConfig& config, int64_t layer);
// Softmax scale of the attention scores: query_pre_attn_scalar^-1/2 or head_dim^-1/2, times the
// rope attention factor squared.
double attention_score_scale(const ModelConfig& config);

}  // namespace tpbatch
