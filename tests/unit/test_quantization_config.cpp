// config.json's quantization_config: the formats that run are parsed into their scale layout, the
// recognised ones that do not run yet and anything unknown are refused naming the key. The
// quantization_config blocks are those of public checkpoints (Qwen3-8B-FP8, llm-compressor's
// FP8-dynamic, INT8 W8A8 and W4A16 models, AWQ and GPTQ Llamas).
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "model/config.h"

namespace tpbatch {
namespace {

using nlohmann::json;

json llama_with(const json& quantization_config) {
  return json{{"architectures", {"LlamaForCausalLM"}}, {"hidden_size", 64}, {"intermediate_size", 172},
              {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
              {"vocab_size", 512}, {"max_position_embeddings", 512}, {"quantization_config", quantization_config}};
}

QuantizationConfig parse(const json& q) { return parse_model_config(llama_with(q).dump(), "", "models/x").quantization; }

std::string error_of(const json& q) {
  try {
    parse(q);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

json compressed_tensors(const json& weights) {
  return json{{"quant_method", "compressed-tensors"},
              {"format", "float-quantized"},
              {"ignore", {"lm_head"}},
              {"config_groups", {{"group_0", {{"targets", {"Linear"}}, {"weights", weights}}}}}};
}

TEST(QuantizationConfig, NoQuantizationConfigMeansUnquantized) {
  json j = llama_with(nullptr);
  j.erase("quantization_config");
  EXPECT_FALSE(parse_model_config(j.dump(), "", "models/x").quantization.quantized());
}

TEST(QuantizationConfig, Fp8BlockScalesOfQwen3Fp8) {
  const auto q = parse({{"activation_scheme", "dynamic"}, {"modules_to_not_convert", {"lm_head"}}, {"fmt", "e4m3"},
                        {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}});
  EXPECT_EQ(q.method, "fp8");
  EXPECT_EQ(q.granularity, ScaleGranularity::Block);
  EXPECT_EQ(q.block_rows, 128);
  EXPECT_EQ(q.block_cols, 128);
  EXPECT_EQ(q.ignore, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(q.scale_tensor_name("model.layers.0.mlp.down_proj.weight"), "model.layers.0.mlp.down_proj.weight_scale_inv");
  EXPECT_EQ(q.scale_shape(4096, 12288), (std::vector<int64_t>{32, 96}));
  EXPECT_EQ(q.scale_shape(1000, 130), (std::vector<int64_t>{8, 2}));  // partial blocks round up
}

TEST(QuantizationConfig, CompressedTensorsFp8PerChannel) {
  const auto q = parse(compressed_tensors({{"num_bits", 8}, {"type", "float"}, {"strategy", "channel"},
                                           {"symmetric", true}, {"dynamic", false}}));
  EXPECT_EQ(q.method, "compressed-tensors");
  EXPECT_EQ(q.granularity, ScaleGranularity::Channel);
  EXPECT_EQ(q.scale_tensor_name("model.layers.3.self_attn.q_proj.weight"), "model.layers.3.self_attn.q_proj.weight_scale");
  EXPECT_TRUE(q.scale_shape_matches({4096, 1}, 4096, 4096));
  EXPECT_TRUE(q.scale_shape_matches({4096}, 4096, 4096));
  EXPECT_FALSE(q.scale_shape_matches({4095, 1}, 4096, 4096));
}

TEST(QuantizationConfig, CompressedTensorsFp8PerTensorTakesOneScale) {
  const auto q = parse(compressed_tensors({{"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}}));
  EXPECT_EQ(q.granularity, ScaleGranularity::Tensor);
  EXPECT_TRUE(q.scale_shape_matches({1}, 64, 64));
  EXPECT_TRUE(q.scale_shape_matches({}, 64, 64));
  EXPECT_FALSE(q.scale_shape_matches({64, 1}, 64, 64));
}

TEST(QuantizationConfig, CompressedTensorsFp8Blocks) {
  const auto q = parse(compressed_tensors({{"num_bits", 8}, {"type", "float"}, {"strategy", "block"},
                                           {"block_structure", {128, 128}}}));
  EXPECT_EQ(q.granularity, ScaleGranularity::Block);
  EXPECT_EQ(q.scale_tensor_name("lm_head.weight"), "lm_head.weight_scale");
}

// llm-compressor's W8A8 scheme as RedHatAI's "*-quantized.w8a8" models write it.
json w8a8(const std::string& strategy = "channel") {
  json q = compressed_tensors({{"actorder", nullptr}, {"block_structure", nullptr}, {"dynamic", false},
                               {"group_size", nullptr}, {"num_bits", 8}, {"observer", "minmax"},
                               {"strategy", strategy}, {"symmetric", true}, {"type", "int"}});
  q["format"] = "int-quantized";
  q["config_groups"]["group_0"]["input_activations"] = {
      {"actorder", nullptr}, {"block_structure", nullptr}, {"dynamic", true}, {"group_size", nullptr},
      {"num_bits", 8}, {"observer", nullptr}, {"strategy", "token"}, {"symmetric", true}, {"type", "int"}};
  return q;
}

TEST(QuantizationConfig, Int8W8A8PerChannelAndPerTensor) {
  QuantizationConfig q = parse(w8a8());
  EXPECT_TRUE(q.int8);
  EXPECT_FALSE(q.int4());
  EXPECT_EQ(q.value_dtype(), DType::I8);
  EXPECT_EQ(q.granularity, ScaleGranularity::Channel);
  EXPECT_EQ(q.scale_tensor_name("model.layers.0.mlp.up_proj.weight"), "model.layers.0.mlp.up_proj.weight_scale");
  EXPECT_TRUE(q.scale_shape_matches({4096, 1}, 4096, 11008));
  EXPECT_FALSE(q.scale_shape_matches({4096, 2}, 4096, 11008));
  EXPECT_EQ(q.describe(), "compressed-tensors: int8 values, scales per channel, activations int8 per token");
  q = parse(w8a8("tensor"));
  EXPECT_EQ(q.granularity, ScaleGranularity::Tensor);
  EXPECT_TRUE(q.scale_shape_matches({1}, 64, 64));
  // A per-group format key (several-group configs write it there) is read too.
  json g = w8a8();
  g.erase("format");
  g["config_groups"]["group_0"]["format"] = "int-quantized";
  EXPECT_TRUE(parse(g).int8);
}

TEST(QuantizationConfig, Int8W8A8OutsideDynamicPerTokenSymmetricIsRefusedNamingTheKey) {
  const std::string group = "quantization_config.config_groups.group_0.";
  auto refused = [&](json q, const std::string& key) {
    const std::string msg = error_of(q);
    EXPECT_NE(msg.find("key '" + key + "'"), std::string::npos) << key << ": " << msg;
  };
  json q = w8a8();
  q["config_groups"]["group_0"]["input_activations"]["dynamic"] = false;  // static input_scale
  refused(q, group + "input_activations.dynamic");
  q = w8a8();
  q["config_groups"]["group_0"]["input_activations"]["strategy"] = "tensor";
  refused(q, group + "input_activations.strategy");
  q = w8a8();
  q["config_groups"]["group_0"]["input_activations"]["symmetric"] = false;
  refused(q, group + "input_activations.symmetric");
  q = w8a8();
  q["config_groups"]["group_0"]["input_activations"] = nullptr;  // W8A16
  refused(q, group + "input_activations");
  q = w8a8();
  q["config_groups"]["group_0"]["weights"]["symmetric"] = false;
  refused(q, group + "weights.symmetric");
  refused(w8a8("group"), group + "weights.strategy");
  q = w8a8();
  q["format"] = "pack-quantized";
  refused(q, "quantization_config.format");
}

json w4a16(json weights) {
  json q = compressed_tensors(weights);
  q["format"] = "pack-quantized";
  return q;
}

TEST(QuantizationConfig, W4A16PackQuantizedGroups) {
  const QuantizationConfig q = parse(w4a16({{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128},
                                            {"symmetric", true}, {"actorder", nullptr}, {"dynamic", false}}));
  EXPECT_TRUE(q.int4());
  EXPECT_EQ(q.packing, Int4Packing::PackQuantized);
  EXPECT_EQ(q.group_size, 128);
  EXPECT_EQ(q.scale_group_width(4096), 128);
  EXPECT_EQ(q.ignore, std::vector<std::string>{"lm_head"});
  EXPECT_EQ(q.describe(), "compressed-tensors: int4 values, zero points and scales per group of 128");
}

TEST(QuantizationConfig, W4A16AsymmetricAndActorderGroupAreRefusedNamingTheKey) {
  std::string msg = error_of(w4a16({{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128},
                                    {"symmetric", false}}));
  EXPECT_NE(msg.find("quantization_config.config_groups.group_0.weights.symmetric"), std::string::npos) << msg;
  msg = error_of(w4a16({{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128},
                        {"actorder", "group"}}));
  EXPECT_NE(msg.find("quantization_config.config_groups.group_0.weights.actorder"), std::string::npos) << msg;
  json q = w4a16({{"num_bits", 4}, {"type", "int"}, {"strategy", "group"}, {"group_size", 128}});
  q["format"] = "int-quantized";
  msg = error_of(q);
  EXPECT_NE(msg.find("quantization_config.format"), std::string::npos) << msg;
}

// AutoAWQ's quantization_config (e.g. TheBloke/*-AWQ, casperhansen/*-awq).
TEST(QuantizationConfig, AwqGemm) {
  const QuantizationConfig q = parse({{"bits", 4}, {"group_size", 128}, {"modules_to_not_convert", nullptr},
                                      {"quant_method", "awq"}, {"version", "gemm"}, {"zero_point", true}});
  EXPECT_EQ(q.packing, Int4Packing::Awq);
  EXPECT_EQ(q.group_size, 128);
  EXPECT_FALSE(q.zeros_minus_one);
}

TEST(QuantizationConfig, AwqOtherPackingsAndBitsAreRefusedNamingTheKey) {
  std::string msg = error_of({{"bits", 4}, {"group_size", 128}, {"quant_method", "awq"}, {"version", "gemv"}});
  EXPECT_NE(msg.find("quantization_config.version"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gemv"), std::string::npos) << msg;
  msg = error_of({{"bits", 3}, {"group_size", 128}, {"quant_method", "awq"}, {"version", "gemm"}});
  EXPECT_NE(msg.find("quantization_config.bits"), std::string::npos) << msg;
  msg = error_of({{"bits", 4}, {"group_size", 0}, {"quant_method", "awq"}});
  EXPECT_NE(msg.find("quantization_config.group_size"), std::string::npos) << msg;
}

// AutoGPTQ's (TheBloke/*-GPTQ) and GPTQModel's v2 format.
TEST(QuantizationConfig, GptqClassicAndV2Zeros) {
  QuantizationConfig q = parse({{"bits", 4}, {"damp_percent", 0.01}, {"desc_act", false}, {"group_size", 128},
                                {"quant_method", "gptq"}, {"sym", true}, {"true_sequential", true}});
  EXPECT_EQ(q.packing, Int4Packing::Gptq);
  EXPECT_TRUE(q.zeros_minus_one);
  EXPECT_FALSE(q.desc_act);
  q = parse({{"bits", 4}, {"group_size", -1}, {"desc_act", true}, {"quant_method", "gptq"},
             {"checkpoint_format", "gptq_v2"}});
  EXPECT_FALSE(q.zeros_minus_one);
  EXPECT_TRUE(q.desc_act);  // run only if g_idx turns out trivial (model/int4_checkpoint.cpp)
  EXPECT_EQ(q.granularity, ScaleGranularity::Channel);
  EXPECT_EQ(q.scale_group_width(4096), 4096);
}

TEST(QuantizationConfig, GptqUnsupportedBitsAndFormatsAreRefusedNamingTheKey) {
  std::string msg = error_of({{"bits", 8}, {"group_size", 128}, {"quant_method", "gptq"}});
  EXPECT_NE(msg.find("quantization_config.bits"), std::string::npos) << msg;
  EXPECT_NE(msg.find("8-bit"), std::string::npos) << msg;
  msg = error_of({{"bits", 4}, {"group_size", 128}, {"quant_method", "gptq"}, {"checkpoint_format", "marlin"}});
  EXPECT_NE(msg.find("quantization_config.checkpoint_format"), std::string::npos) << msg;
}

TEST(QuantizationConfig, UnknownQuantMethodIsRefusedNamingTheKeyAndValue) {
  const std::string msg = error_of({{"quant_method", "bitsandbytes"}, {"load_in_4bit", true}});
  EXPECT_NE(msg.find("models/x/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("quantization_config.quant_method"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bitsandbytes"), std::string::npos) << msg;
}

TEST(QuantizationConfig, MissingQuantMethodIsNamed) {
  const std::string msg = error_of({{"bits", 4}});
  EXPECT_NE(msg.find("quantization_config.quant_method"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(QuantizationConfig, Fp8E5m2IsRefusedNamingFmt) {
  const std::string msg = error_of({{"quant_method", "fp8"}, {"fmt", "e5m2"}, {"weight_block_size", {128, 128}}});
  EXPECT_NE(msg.find("quantization_config.fmt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("e5m2"), std::string::npos) << msg;
}

TEST(QuantizationConfig, Fp8WithoutBlockSizeIsRefusedNamingTheKey) {
  const std::string msg = error_of({{"quant_method", "fp8"}, {"activation_scheme", "static"}});
  EXPECT_NE(msg.find("quantization_config.weight_block_size"), std::string::npos) << msg;
}

TEST(QuantizationConfig, BadBlockSizeIsNamed) {
  const std::string msg = error_of({{"quant_method", "fp8"}, {"weight_block_size", {128, 0}}});
  EXPECT_NE(msg.find("quantization_config.weight_block_size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[128,0]"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tpbatch
