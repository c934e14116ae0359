// Which projections a quantized checkpoint's config leaves unquantized (compressed-tensors'
// `ignore`, transformers' modules_to_not_convert), and that `plan` counts those in the weights'
// dtype. The expected bytes are worked out here from the shapes, not by the code under test. One
// config is a real llm-compressor output (tests/data/real_checkpoints/README.md says where from).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/config.h"
#include "model/shard_bytes.h"
#include "test_assets.h"

namespace tpbatch {
namespace {

using nlohmann::json;

constexpr int64_t kHidden = 256, kInter = 384, kLayers = 2;

json llama_with(const json& quantization_config) {
  return json{{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", kHidden}, {"intermediate_size", kInter},
              {"num_hidden_layers", kLayers}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
              {"vocab_size", 512}, {"max_position_embeddings", 512}, {"quantization_config", quantization_config}};
}

ModelConfig config_with(const json& q) { return parse_model_config(llama_with(q).dump(), "", "models/x"); }

json compressed_tensors_fp8_channel(const json& ignore) {
  return json{{"quant_method", "compressed-tensors"},
              {"format", "float-quantized"},
              {"ignore", ignore},
              {"config_groups",
               {{"group_0",
                 {{"targets", {"Linear"}},
                  {"weights", {{"type", "float"}, {"num_bits", 8}, {"strategy", "channel"}, {"symmetric", true}}}}}}}};
}

json fp8_block(const json& modules_to_not_convert) {
  return json{{"quant_method", "fp8"},
              {"fmt", "e4m3"},
              {"activation_scheme", "dynamic"},
              {"weight_block_size", {128, 128}},
              {"modules_to_not_convert", modules_to_not_convert}};
}

TEST(QuantizationIgnore, CompressedTensorsEntriesAreNamesOrPatternsMatchedFromTheStart) {
  const QuantizationConfig q =
      config_with(compressed_tensors_fp8_channel({"lm_head", "re:.*mlp.gate$", "re:model.layers.0.mlp.*"})).quantization;
  EXPECT_TRUE(q.leaves_unquantized("lm_head"));
  EXPECT_FALSE(q.leaves_unquantized("model.lm_head"));  // a plain entry is a whole name
  EXPECT_TRUE(q.leaves_unquantized("model.layers.3.mlp.gate"));
  EXPECT_FALSE(q.leaves_unquantized("model.layers.3.mlp.gate_proj"));  // `$` ends the router's name
  EXPECT_TRUE(q.leaves_unquantized("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(q.leaves_unquantized("model.layers.10.mlp.down_proj"));
  EXPECT_FALSE(q.leaves_unquantized("model.layers.0.self_attn.q_proj"));
  // re.match anchors at the start only: ".*lm_head" finds a prefixed lm_head too.
  const QuantizationConfig any = config_with(compressed_tensors_fp8_channel({"re:.*lm_head"})).quantization;
  EXPECT_TRUE(any.leaves_unquantized("lm_head"));
  EXPECT_TRUE(any.leaves_unquantized("model.lm_head"));
  EXPECT_FALSE(any.leaves_unquantized("model.layers.0.self_attn.o_proj"));
}

TEST(QuantizationIgnore, ModulesToNotConvertEntriesMatchAnyNameContainingThem) {
  const QuantizationConfig q = config_with(fp8_block({"lm_head", "model.layers.1.self_attn"})).quantization;
  EXPECT_TRUE(q.leaves_unquantized("lm_head"));
  EXPECT_TRUE(q.leaves_unquantized("model.layers.1.self_attn.q_proj"));
  EXPECT_FALSE(q.leaves_unquantized("model.layers.1.mlp.down_proj"));
  EXPECT_FALSE(q.leaves_unquantized("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(config_with(fp8_block(nullptr)).quantization.leaves_unquantized("lm_head"));
}

TEST(QuantizationIgnore, AnUnreadablePatternIsRefusedNamingTheKey) {
  try {
    config_with(compressed_tensors_fp8_channel({"lm_head", "re:model.layers.[0"}));
    FAIL() << "a broken pattern was accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("quantization_config.ignore"), std::string::npos) << msg;
    EXPECT_NE(msg.find("re:model.layers.[0"), std::string::npos) << msg;
  }
}

ShardPlacement whole_model(const ModelConfig& cfg) {
  ShardPlacement p;
  p.layers = Range{0, cfg.num_layers};
  return p;
}

// Per-block fp8 with 128 x 128 blocks keeps one F32 scale per output row and block of 128 inputs
// (model/quantization.h); a projection left unquantized is held in the weights' dtype instead.
TEST(QuantizationIgnore, PlanCountsTheProjectionsTheConfigLeavesUnquantizedInTheWeightDtype) {
  const ModelConfig all = config_with(fp8_block({"lm_head"}));
  const ModelConfig mlp0 = config_with(fp8_block({"lm_head", "model.layers.0.mlp"}));
  const int64_t mlp_values = 3 * kInter * kHidden;
  const int64_t blocks_of_hidden = (kHidden + 127) / 128, blocks_of_inter = (kInter + 127) / 128;
  const int64_t mlp_scales = 2 * kInter * blocks_of_hidden + kHidden * blocks_of_inter;
  for (DType wt : {DType::BF16, DType::F32}) {
    const int64_t quantized_mlp = mlp_values + 4 * mlp_scales;
    const int64_t plain_mlp = mlp_values * static_cast<int64_t>(dtype_size(wt));
    EXPECT_EQ(shard_weight_bytes(mlp0, whole_model(mlp0), wt) - shard_weight_bytes(all, whole_model(all), wt),
              plain_mlp - quantized_mlp)
        << dtype_name(wt);
  }
  // Every projection of every layer ignored: the plan is the unquantized model's.
  const ModelConfig none = config_with(fp8_block({"model.layers."}));
  const ModelConfig plain = parse_model_config([] {
    json j = llama_with(nullptr);
    j.erase("quantization_config");
    return j.dump();
  }(), "", "models/x");
  EXPECT_EQ(shard_weight_bytes(none, whole_model(none), DType::BF16),
            shard_weight_bytes(plain, whole_model(plain), DType::BF16));
}

// A real llm-compressor W4A16 config.json (GLM-5, an architecture tpbatch does not run: only its
// quantization_config is read here).
TEST(QuantizationIgnore, RealLlmCompressorW4a16ConfigParsesToItsScheme) {
  const auto path = test::test_data_dir() / "real_checkpoints/glm5-w4a16-llm-compressor/config.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  const json config = json::parse(in);
  const QuantizationConfig q = parse_quantization_config(config.at("quantization_config"), path.string());
  EXPECT_EQ(q.describe(), "compressed-tensors: int4 values, zero points and scales per group of 64");
  EXPECT_EQ(q.packing, Int4Packing::PackQuantized);
  EXPECT_EQ(q.group_size, 64);
  EXPECT_TRUE(q.leaves_unquantized("lm_head"));
  EXPECT_FALSE(q.leaves_unquantized("model.layers.0.mlp.down_proj"));
  EXPECT_FALSE(q.leaves_unquantized("model.layers.0.self_attn.o_proj"));
}

}  // namespace
}  // namespace tpbatch
