// `tpbatch make-model DIR [--preset tiny|125m|8b ...]`: tools/make_model.h
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

#include "app/subcommands.h"
#include "common/error.h"
#include "tools/make_model.h"

namespace tpbatch {

Subcommand add_make_model_subcommand(CLI::App& program) {
  struct Args {
    std::string dir;
    MakeModelOptions mm;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = program.add_subcommand("make-model", "write a model folder with seeded random weights");
  cmd->add_option("dir", a->dir, "output folder")->required();
  cmd->add_option("--preset", a->mm.preset, "tiny | 125m | 8b")->capture_default_str();
  cmd->add_option("--architecture", a->mm.architecture, "LlamaForCausalLM | Qwen2ForCausalLM | MistralForCausalLM");
  cmd->add_option("--hidden-size", a->mm.hidden_size);
  cmd->add_option("--intermediate-size", a->mm.intermediate_size);
  cmd->add_option("--layers", a->mm.num_layers);
  cmd->add_option("--heads", a->mm.num_heads);
  cmd->add_option("--kv-heads", a->mm.num_kv_heads);
  cmd->add_option("--head-dim", a->mm.head_dim);
  cmd->add_option("--vocab-size", a->mm.vocab_size);
  cmd->add_option("--max-position-embeddings", a->mm.max_position_embeddings);
  cmd->add_option("--tie-word-embeddings", a->mm.tie_word_embeddings, "0 or 1");
  cmd->add_option("--dtype", a->mm.dtype, "float32 | bfloat16 | float16");
  cmd->add_option("--rope-scaling", a->mm.rope_scaling, "none | llama3");
  cmd->add_flag("--attention-bias", a->mm.attention_bias);
  cmd->add_option("--experts", a->mm.num_experts, "MoE architectures: experts per layer")->capture_default_str();
  cmd->add_option("--experts-per-token", a->mm.experts_per_token, "MoE: the router's top-k")->capture_default_str();
  cmd->add_option("--moe-intermediate-size", a->mm.moe_intermediate_size, "Qwen3-MoE: each expert's FFN width")
      ->capture_default_str();
  cmd->add_option("--norm-topk-prob", a->mm.norm_topk_prob, "Qwen3-MoE: renormalise the top-k weights (0 or 1)");
  cmd->add_option("--mlp-only-layers", a->mm.mlp_only_layers, "Qwen3-MoE: dense layers (comma-separated)")->delimiter(',');
  cmd->add_option("--seed", a->mm.seed);
  cmd->add_option("--quantize", a->mm.quantize, "none | fp8-block | fp8-channel | int8 | awq | gptq | w4a16: linear layers written as fp8 or int8 (W8A8) with scales or as 4-bit integers with scales and zero points (group size 128)")
      ->check(CLI::IsMember({"none", "fp8-block", "fp8-channel", "int8", "awq", "gptq", "w4a16"}))
      ->capture_default_str();
  cmd->add_flag("--dequantize", a->mm.dequantize, "with --quantize: the same weights dequantized to float32 (the twin)");

  return {cmd, [a] {
            make_model(a->dir, a->mm);
            std::printf("wrote %s\n", a->dir.c_str());
            return kExitOk;
          }};
}

}  // namespace tpbatch
