// Independent, naive, double-precision reference forward pass for Hugging Face
// Llama / Mistral / Qwen2 model folders. Used by the tests to check the engine.
//
// This code deliberately shares NOTHING with the engine in src/: it has its own
// safetensors reader, its own config.json reader and its own forward pass, all
// written for clarity rather than speed. Do not include anything from src/ here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

// The parts of config.json the reference uses.
struct ReferenceConfig {
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // config "head_dim" when present and non-null, else hidden / heads
  int num_hidden_layers = 0;
  int vocab_size = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;
  // RoPE scaling: "" (none / "default"), "linear" or "llama3".
  std::string rope_scaling_type;
  double rope_factor = 1.0;
  double rope_low_freq_factor = 1.0;
  double rope_high_freq_factor = 4.0;
  double rope_original_max_position_embeddings = 8192.0;
};

// Parses <model_dir>/config.json. Throws std::runtime_error on problems.
ReferenceConfig reference_read_config(const std::string& model_dir);

// RoPE inverse frequencies (head_dim / 2 values), including rope_scaling
// ("linear": divided by factor; "llama3": HF _compute_llama3_parameters).
std::vector<double> reference_rope_inv_freq(const ReferenceConfig& config);

// Scalar conversions used by the safetensors reader (bit patterns in, value out).
double reference_f16_to_double(uint16_t bits);
double reference_bf16_to_double(uint16_t bits);

// A tensor converted to double, row-major, with its shape.
struct ReferenceTensor {
  std::vector<int64_t> shape;
  std::vector<double> data;
};

// Reads every tensor of one .safetensors file (F64/F32/F16/BF16) into doubles.
std::map<std::string, ReferenceTensor> reference_read_safetensors(const std::string& path);

class ReferenceLlama {
 public:
  // model_dir holds config.json and model.safetensors (or a sharded set listed
  // in model.safetensors.index.json).
  explicit ReferenceLlama(const std::string& model_dir);

  int vocab_size() const { return config_.vocab_size; }
  const ReferenceConfig& config() const { return config_; }

  // Logits for every position of `tokens` (one row per position), computed
  // from scratch with causal attention (no state kept between calls).
  std::vector<std::vector<double>> logits(const std::vector<int>& tokens) const;

  // Greedy decoding: appends max_new_tokens argmax tokens (ties go to the
  // lowest id), never stopping early. Returns ONLY the new tokens.
  // Uses a KV cache internally (mathematically the same as full recompute).
  std::vector<int> greedy(const std::vector<int>& prompt, int max_new_tokens) const;

  // Numerically stable log-softmax.
  static std::vector<double> log_softmax(const std::vector<double>& logits);

  // Index of the largest value; ties go to the lowest index.
  static int argmax(const std::vector<double>& values);

 private:
  struct Layer {
    std::vector<double> input_norm, post_norm;
    std::vector<double> wq, wk, wv, wo;        // [out, in], row-major
    std::vector<double> bq, bk, bv, bo;        // empty when absent
    std::vector<double> w_gate, w_up, w_down;  // [out, in], row-major
    std::vector<double> b_gate, b_up, b_down;  // empty when absent
  };
  // Keys and values per layer, one vector of (kv_heads * head_dim) per position.
  struct KvCache {
    std::vector<std::vector<std::vector<double>>> k, v;  // [layer][pos][kv_dim]
  };

  // Runs `tokens` at positions cache.size().. and appends them to the cache.
  // Returns the logits of every new position, or only of the last one when
  // last_only is set.
  std::vector<std::vector<double>> forward(const std::vector<int>& tokens, KvCache& cache,
                                           bool last_only) const;

  ReferenceConfig config_;
  std::vector<double> inv_freq_;
  std::vector<double> embed_;    // [vocab, hidden]
  std::vector<double> lm_head_;  // [vocab, hidden]
  std::vector<double> final_norm_;
  std::vector<Layer> layers_;
};
