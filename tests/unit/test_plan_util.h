#pragma once
// Shared by the plan tests: published Llama-3.1 config.json files written into temp folders.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "model/config.h"

namespace tpbatch::plan_test {

inline std::filesystem::path make_temp_dir(const std::string& tag) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() / ("tpbatch-plan-" + tag + "-" + std::to_string(rd()));
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// The published config.json of Llama-3.1 (8B, 70B, 405B share everything but the shapes).
inline std::string llama31_config_json(int hidden, int inter, int layers, int heads) {
  return R"({
  "architectures": ["LlamaForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009],
  "hidden_act": "silu",
  "hidden_size": )" + std::to_string(hidden) + R"(,
  "initializer_range": 0.02,
  "intermediate_size": )" + std::to_string(inter) + R"(,
  "max_position_embeddings": 131072,
  "mlp_bias": false,
  "model_type": "llama",
  "num_attention_heads": )" + std::to_string(heads) + R"(,
  "num_hidden_layers": )" + std::to_string(layers) + R"(,
  "num_key_value_heads": 8,
  "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  },
  "rope_theta": 500000.0,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.43.0.dev0",
  "use_cache": true,
  "vocab_size": 128256
}
)";
}

inline std::string llama31_8b() { return llama31_config_json(4096, 14336, 32, 32); }
inline std::string llama31_70b() { return llama31_config_json(8192, 28672, 80, 64); }
inline std::string llama31_405b() { return llama31_config_json(16384, 53248, 126, 128); }

// A model folder holding only config.json.
inline std::filesystem::path write_model_dir(const std::string& tag, const std::string& config_json) {
  auto dir = make_temp_dir(tag);
  write_file(dir / "config.json", config_json);
  return dir;
}

inline ModelConfig load_config_text(const std::string& tag, const std::string& config_json) {
  auto dir = write_model_dir(tag, config_json);
  ModelConfig cfg = load_model_config(dir);
  std::filesystem::remove_all(dir);
  return cfg;
}

}  // namespace tpbatch::plan_test
