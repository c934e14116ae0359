#pragma once
// make-model's options resolved into one model description: the preset's shape with the
// overrides applied and checked, the dtype, and the architecture's family features.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/make_model.h"

namespace tpbatch {

struct ResolvedModel {
  std::string architecture, model_type;
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0, max_pos = 0;
  bool tied = false, attention_bias = false;
  bool qk_norm = false, fused = false, gemma = false, sandwich = false;  // Qwen3 / Gemma 3; Phi-3; Gemma; Gemma 2 / 3
  bool mixtral = false, qwen_moe = false, qwen2_moe = false;  // mixture of experts (Qwen3- or Qwen2-MoE keys)
  int64_t experts = 0, top_k = 0, moe_inter = 0;      // moe_inter: each expert's FFN width
  int64_t shared_inter = 0;                           // Qwen2-MoE's shared expert width
  bool norm_topk_prob = true;
  std::vector<int64_t> mlp_only_layers;                // Qwen3-MoE's dense layers
  bool moe_layer(int64_t l) const {
    return (mixtral || qwen_moe) && std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) == mlp_only_layers.end();
  }
  std::string dtype;  // float32 | bfloat16 | float16
  std::string rope_scaling;
  double rope_theta = 10000.0, rms_norm_eps = 1e-5;
};

// Throws tpbatch::Error naming the option that is unknown or out of range.
ResolvedModel resolve_model(const MakeModelOptions& o);

}  // namespace tpbatch
