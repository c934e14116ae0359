// The table of model families.
#include "model/model_family.h"

#include "common/error.h"

namespace tpbatch {

const std::vector<ModelFamily>& model_families() {
  using A = AttentionBiasRule;
  using W = WindowRule;
  using M = MoeRule;
  // Designated initializers: a row names only what differs from a plain Llama.
  static const std::vector<ModelFamily> families = {
      {.architecture = "LlamaForCausalLM", .model_type = "llama", .activation = "silu", .mlp_bias = true,
       .o_proj_bias = true},
      {.architecture = "MistralForCausalLM", .model_type = "mistral", .activation = "silu", .window = W::kEveryLayer},
      {.architecture = "Qwen2ForCausalLM", .model_type = "qwen2", .activation = "silu", .attention_bias = A::kAlways,
       .window = W::kQwen},
      {.architecture = "Qwen3ForCausalLM", .model_type = "qwen3", .activation = "silu", .qk_norm = true,
       .window = W::kQwen},
      {.architecture = "Phi3ForCausalLM", .model_type = "phi3", .activation = "silu", .attention_bias = A::kNone,
       .fused_projections = true, .window = W::kEveryLayer},
      {.architecture = "GemmaForCausalLM", .model_type = "gemma", .activation = "gelu_pytorch_tanh",
       .gemma_activation_keys = true, .gemma1_gelu = true, .attention_bias = A::kNone, .tied_embeddings = true,
       .gemma_norms = true},
      {.architecture = "Gemma2ForCausalLM", .model_type = "gemma2", .activation = "gelu_pytorch_tanh",
       .gemma_activation_keys = true, .attention_bias = A::kNone, .tied_embeddings = true, .gemma_norms = true,
       .sandwich_norms = true, .window = W::kAlternating},
      {.architecture = "Gemma3ForCausalLM", .model_type = "gemma3_text", .activation = "gelu_pytorch_tanh",
       .gemma_activation_keys = true, .attention_bias = A::kNone, .tied_embeddings = true, .qk_norm = true,
       .gemma_norms = true, .sandwich_norms = true, .local_rope_base = true, .window = W::kPattern},
      {.architecture = "MixtralForCausalLM", .model_type = "mixtral", .activation = "silu",
       .window = W::kEveryLayer, .moe = M::kMixtral},
      {.architecture = "Qwen3MoeForCausalLM", .model_type = "qwen3_moe", .activation = "silu", .qk_norm = true,
       .window = W::kQwen, .moe = M::kQwen3Moe},
      {.architecture = "Qwen2MoeForCausalLM", .model_type = "qwen2_moe", .activation = "silu",
       .attention_bias = A::kFromQkvBias, .window = W::kQwen, .moe = M::kQwen2Moe},
  };
  return families;
}

const ModelFamily* find_model_family(std::string_view architecture) {
  for (const ModelFamily& f : model_families())
    if (architecture == f.architecture) return &f;
  return nullptr;
}

const ModelFamily& model_family(std::string_view architecture) {
  if (const ModelFamily* f = find_model_family(architecture)) return *f;
  throw Error("internal error: no model family '" + std::string(architecture) + "' (supported: " +
              supported_architectures() + ")");
}

std::string supported_architectures() {
  std::string out;
  for (const ModelFamily& f : model_families()) out += (out.empty() ? "" : ", ") + std::string(f.architecture);
  return out;
}

}  // namespace tpbatch
