#pragma once
// Writes a Hugging Face model folder with seeded random weights and a small tokenizer.json, so the
// quickstart, tests and benchmarks run with no downloads.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tpbatch {

struct MakeModelOptions {
  std::string preset = "tiny";   // tiny (~stories260K shapes) | 125m | 8b (shapes for benchmarks)
  std::string architecture = "LlamaForCausalLM";  // | Qwen2ForCausalLM | MistralForCausalLM
  int64_t hidden_size = -1;      // -1 = preset's
  int64_t intermediate_size = -1;
  int64_t num_layers = -1;
  int64_t num_heads = -1;
  int64_t num_kv_heads = -1;
  int64_t head_dim = -1;
  int64_t vocab_size = -1;
  int64_t max_position_embeddings = -1;
  int tie_word_embeddings = -1;  // -1 = preset's, 0/1
  std::string dtype = "float32"; // float32 | bfloat16 | float16
  std::string rope_scaling = "none";  // none | llama3
  bool attention_bias = false;
  // MixtralForCausalLM / Qwen3MoeForCausalLM: experts per MoE layer, the router's top-k, each
  // expert's FFN width (Qwen3-MoE's moe_intermediate_size; Mixtral's experts use
  // intermediate_size), Qwen3-MoE's norm_topk_prob and dense layers (mlp_only_layers).
  int64_t num_experts = 4;
  int64_t experts_per_token = 2;
  int64_t moe_intermediate_size = 96;
  bool norm_topk_prob = true;
  std::vector<int64_t> mlp_only_layers;
  uint64_t seed = 1;
  // none | fp8-block | fp8-channel (tools/fp8_quantizer.h) | awq | gptq | w4a16
  // (tools/int4_quantizer.h): the linear layers written quantized;
  // with `dequantize` the same weights dequantized to float32 instead (the quantized model's twin).
  std::string quantize = "none";
  bool dequantize = false;
};

void make_model(const std::filesystem::path& out_dir, const MakeModelOptions& options);

}  // namespace tpbatch
