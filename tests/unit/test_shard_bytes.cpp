// The shapes-only byte counts `tpbatch plan` uses (model/shard_bytes.h) against what
// load_llama_shard and ModelRunner really allocate, for every dtype, TP rank and pipeline stage of
// small generated models (tied and untied, with and without q/k/v and o_proj biases, fp8).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "model/config.h"
#include "model/int4_checkpoint.h"
#include "model/llama_shard.h"
#include "model/model_runner.h"
#include "model/safetensors.h"
#include "model/shard_bytes.h"
#include "tools/make_model.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

class NoCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }

 private:
  void run_allreduce_sum(BufferView, size_t) override {}
  void run_allreduce_max(BufferView, size_t) override {}
  void run_allgather(BufferView, BufferView, size_t) override {}
  void run_send(BufferView, size_t, int) override {}
  void run_recv(BufferView, size_t, int) override {}
};

struct Case {
  const char* name;
  MakeModelOptions options;
  bool longrope = false;  // Phi-3 longrope past a shorter original context: a second RoPE table
};

void make_longrope(const fs::path& dir) {
  nlohmann::json c;
  std::ifstream(dir / "config.json") >> c;
  const int64_t half = c["head_dim"].get<int64_t>() / 2;
  c["original_max_position_embeddings"] = c["max_position_embeddings"].get<int64_t>() / 4;
  c["rope_scaling"] = {{"type", "longrope"},
                       {"short_factor", std::vector<double>(static_cast<size_t>(half), 1.5)},
                       {"long_factor", std::vector<double>(static_cast<size_t>(half), 6.0)}};
  std::ofstream(dir / "config.json") << c.dump(2);
}

std::vector<Case> cases() {
  MakeModelOptions tied;  // tiny: stories260K shapes, tied embeddings
  MakeModelOptions untied;
  untied.tie_word_embeddings = 0;
  untied.num_kv_heads = 2;
  MakeModelOptions llama_bias;  // Llama attention_bias: q/k/v and o_proj biases
  llama_bias.attention_bias = true;
  llama_bias.tie_word_embeddings = 0;
  MakeModelOptions qwen;  // Qwen2: q/k/v biases only
  qwen.architecture = "Qwen2ForCausalLM";
  qwen.attention_bias = true;
  // Families beyond Llama: q/k norms, fused projections, sandwich norms, a second RoPE table.
  MakeModelOptions qwen3, phi3, gemma, gemma2, gemma3;
  qwen3.architecture = "Qwen3ForCausalLM";
  qwen3.head_dim = 16;
  phi3.architecture = "Phi3ForCausalLM";
  phi3.tie_word_embeddings = 0;
  gemma.architecture = "GemmaForCausalLM";
  gemma.num_kv_heads = 1;
  gemma2.architecture = "Gemma2ForCausalLM";
  gemma3.architecture = "Gemma3ForCausalLM";
  gemma3.num_kv_heads = 1;
  // Mixture of experts: the router and every expert's slices; Qwen3-MoE with a dense layer;
  // Qwen2-MoE's shared expert and its gate row.
  MakeModelOptions mixtral, qwen3_moe, qwen2_moe;
  mixtral.architecture = "MixtralForCausalLM";
  mixtral.num_layers = 2;
  qwen3_moe.architecture = "Qwen3MoeForCausalLM";
  qwen3_moe.num_layers = 3;
  qwen3_moe.mlp_only_layers = {1};
  qwen2_moe.architecture = "Qwen2MoeForCausalLM";
  qwen2_moe.num_layers = 3;
  qwen2_moe.mlp_only_layers = {1};
  // fp8 checkpoints: one byte per projection weight plus scales, at TP splits that start a
  // row-parallel shard inside a 128-column scale block (intermediate 172 / 2), fused and MoE too.
  MakeModelOptions fp8_block = untied, fp8_channel = untied, fp8_phi3 = phi3, fp8_moe = qwen2_moe;
  for (MakeModelOptions* o : {&fp8_block, &fp8_phi3, &fp8_moe}) o->quantize = "fp8-block";
  fp8_channel.quantize = "fp8-channel";
  // int8 (W8A8): one byte per projection weight and one scale per output row; fused (Phi-3) too.
  MakeModelOptions int8 = untied, int8_phi3 = phi3;
  int8.quantize = int8_phi3.quantize = "int8";
  // 4-bit checkpoints: half a byte per projection weight plus a scale and a zero point per group of
  // 128, with the row-parallel shard starting inside a group at TP=2 (intermediate 640 / 2) and
  // groups of one rank's columns at TP=8; fused (Phi-3) and experts (Qwen2-MoE: 128-wide experts).
  MakeModelOptions int4_base;
  int4_base.hidden_size = 256;
  int4_base.intermediate_size = 640;
  int4_base.num_heads = 8;
  int4_base.num_kv_heads = 8;
  int4_base.head_dim = 32;
  int4_base.num_layers = 2;
  int4_base.tie_word_embeddings = 0;
  MakeModelOptions awq = int4_base, gptq = int4_base, w4a16 = int4_base, awq_phi3 = int4_base, gptq_moe = int4_base;
  awq.quantize = awq_phi3.quantize = "awq";
  gptq.quantize = gptq_moe.quantize = "gptq";
  w4a16.quantize = "w4a16";
  awq_phi3.architecture = "Phi3ForCausalLM";
  gptq_moe.architecture = "Qwen2MoeForCausalLM";
  gptq_moe.moe_intermediate_size = 128;
  gptq_moe.mlp_only_layers = {1};
  return {{"awq", awq}, {"gptq", gptq}, {"w4a16", w4a16}, {"awq_phi3", awq_phi3}, {"gptq_qwen2_moe", gptq_moe},
          {"tied", tied},   {"untied", untied}, {"llama_bias", llama_bias}, {"qwen2", qwen},
          {"qwen3", qwen3}, {"phi3", phi3},     {"gemma", gemma},           {"gemma2", gemma2},
          {"gemma3", gemma3}, {"mixtral", mixtral}, {"qwen3_moe", qwen3_moe}, {"qwen2_moe", qwen2_moe},
          {"phi3_longrope", phi3, true},
          {"fp8_block", fp8_block}, {"fp8_channel", fp8_channel}, {"fp8_phi3", fp8_phi3}, {"fp8_qwen2_moe", fp8_moe},
          {"int8", int8}, {"int8_phi3", int8_phi3}};
}

TEST(ShardBytes, PlanFormulaEqualsLoadedShardForEveryDtypeRankAndStage) {
  const fs::path root = fs::temp_directory_path() / ("tpbatch_test_shard_bytes_" + std::to_string(::getpid()));
  for (const Case& c : cases()) {
    const fs::path dir = root / c.name;
    fs::remove_all(dir);
    make_model(dir, c.options);
    if (c.longrope) make_longrope(dir);
    const ModelConfig cfg = load_model_config(dir);
    WeightStore ws = WeightStore::open(dir);
    add_int4_weights(ws, cfg.quantization);
    auto be = make_cpu_backend();
    for (DType wt : {DType::F32, DType::BF16, DType::F16})
      for (int tensor : {1, 2, 8})
        for (int pipeline : {1, 2})
          for (int stage = 0; stage < pipeline; ++stage)
            for (int r = 0; r < tensor; ++r) {
              ShardPlacement p;
              p.tensor = tensor;
              p.tp_rank = r;
              p.layers = layers_of_stage(cfg.num_layers, pipeline, stage);
              p.has_embedding = stage == 0;
              p.has_lm_head = stage == pipeline - 1;
              const LlamaShard s = load_llama_shard(cfg, ws, p, *be, wt);
              EXPECT_EQ(static_cast<int64_t>(s.weight_bytes()), shard_weight_bytes(cfg, p, wt))
                  << c.name << " " << dtype_name(wt) << " TP " << tensor << " rank " << r << " stage " << stage << "/"
                  << pipeline;
            }
  }
  fs::remove_all(root);
}

TEST(ShardBytes, KvBytesPerTokenEqualTheCacheModelRunnerAllocates) {
  const fs::path dir = fs::temp_directory_path() / ("tpbatch_test_shard_kv_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  make_model(dir, {});
  const ModelConfig cfg = load_model_config(dir);
  const WeightStore ws = WeightStore::open(dir);
  auto be = make_cpu_backend();
  NoCommunicator comm;
  for (DType kv_dtype : {DType::F32, DType::BF16})
    for (int tensor : {1, 2, 8}) {
      ShardPlacement p;
      p.tensor = tensor;
      p.layers = Range{0, cfg.num_layers};
      KvLayout kv;
      kv.num_blocks = 10;
      kv.block_size = 16;
      kv.dtype = kv_dtype;
      ModelRunner runner(load_llama_shard(cfg, ws, p, *be, DType::F32), *be, comm, kv);
      const int64_t per_token = ModelRunner::kv_bytes_per_token(cfg, tensor, cfg.num_layers, kv_dtype);
      EXPECT_EQ(per_token, kv_bytes_per_token_of_rank(cfg, tensor, 0, cfg.num_layers, kv_dtype));
      EXPECT_EQ(static_cast<int64_t>(runner.kv_cache_bytes()), per_token * 10 * 16)
          << dtype_name(kv_dtype) << " TP " << tensor;
    }
  // stories260K shapes: 2 x 4 KV heads x 8 x 5 layers x 4 bytes at TP 1.
  EXPECT_EQ(kv_bytes_per_token_of_rank(cfg, 1, 0, 5, DType::F32), 1280);
  EXPECT_EQ(kv_bytes_per_token_of_rank(cfg, 1, 0, 5, DType::BF16), 640);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tpbatch
