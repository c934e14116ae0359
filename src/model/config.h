#pragma once
// config.json (+ generation_config.json) of a Hugging Face decoder-only model folder.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tpbatch {

struct RopeScaling {
  std::string type = "none";                // none | linear | llama3
  double factor = 1.0;                      // linear and llama3
  double low_freq_factor = 1.0;             // llama3
  double high_freq_factor = 4.0;            // llama3
  int64_t original_max_position_embeddings = 8192;  // llama3
};

struct ModelConfig {
  std::string architecture;                 // LlamaForCausalLM | MistralForCausalLM | Qwen2ForCausalLM
  std::string model_type;                   // llama | mistral | qwen2
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
  bool attention_bias = false;              // q/k/v biases (Qwen2)
  int64_t sliding_window = 0;               // 0 = none
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

// RoPE inverse frequencies (head_dim/2 of them), rope_scaling applied as Hugging Face does.
std::vector<double> rope_inverse_frequencies(const ModelConfig& config);

}  // namespace tpbatch
