// config.json / generation_config.json parsing and RoPE frequencies.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "temp_dir_test.h"
#include "common/error.h"
#include "model/config.h"
#include "model/rope_frequencies.h"
#include "test_assets.h"

namespace fs = std::filesystem;
using nlohmann::json;
using tpbatch::Error;
using tpbatch::ModelConfig;
using tpbatch::parse_model_config;

namespace {

json base_config() {
  return json{{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"hidden_size", 64},
              {"intermediate_size", 172},
              {"num_hidden_layers", 2},
              {"num_attention_heads", 8},
              {"num_key_value_heads", 4},
              {"vocab_size", 512},
              {"max_position_embeddings", 512},
              {"rms_norm_eps", 1e-5},
              {"hidden_act", "silu"},
              {"bos_token_id", 1},
              {"eos_token_id", 2}};
}

ModelConfig parse(const json& config, const std::string& generation = "") {
  return parse_model_config(config.dump(), generation, "models/x");
}

// The Error message of parsing config (empty when it parses).
std::string error_of(const json& config, const std::string& generation = "") {
  try {
    parse(config, generation);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 1);
    return e.what();
  }
  return "";
}

class ModelConfigFiles : public tpbatch::TempDirTest {
 protected:
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
};

}  // namespace

TEST(ModelConfig, ParsesStories260K) {
  const fs::path dir = tpbatch::test::stories_dir();
  const ModelConfig c = tpbatch::load_model_config(dir);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.model_type, "llama");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 172);
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.num_heads, 8);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_EQ(c.rope_scaling.type, "none");
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>({2}));
  EXPECT_EQ(c.torch_dtype, "float32");
}

TEST(ModelConfig, DefaultsForOptionalKeys) {
  json j = base_config();
  j.erase("num_key_value_heads");
  j.erase("rms_norm_eps");
  j.erase("hidden_act");
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.rope_scaling.type, "none");
  EXPECT_EQ(c.torch_dtype, "float32");
}

TEST(ModelConfig, HeadDimFromConfigOverridesHiddenOverHeads) {
  json j = base_config();
  j["head_dim"] = 16;
  EXPECT_EQ(parse(j).head_dim, 16);
  j["head_dim"] = nullptr;
  EXPECT_EQ(parse(j).head_dim, 8);
}

TEST(ModelConfig, MergesEosIdsFromGenerationConfig) {
  json j = base_config();
  j["eos_token_id"] = 2;
  const ModelConfig c = parse(j, R"({"bos_token_id": 1, "eos_token_id": [7, 2, 9, 7]})");
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>({2, 7, 9}));
  EXPECT_EQ(c.bos_token_id, 1);
}

TEST(ModelConfig, EosListInConfigIsDeduplicated) {
  json j = base_config();
  j["eos_token_id"] = {5, 2, 5};
  EXPECT_EQ(parse(j).eos_token_ids, std::vector<int32_t>({5, 2}));
}

TEST(ModelConfig, NoEosAnywhereGivesEmptyList) {
  json j = base_config();
  j["eos_token_id"] = nullptr;
  j.erase("bos_token_id");
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_EQ(c.bos_token_id, -1);
}

TEST(ModelConfig, Qwen2AlwaysHasAttentionBiasAndNoWindowWhenDisabled) {
  json j = base_config();
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  j["use_sliding_window"] = false;
  j["sliding_window"] = 128;
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.sliding_window, 0);
  j["use_sliding_window"] = true;
  j["max_window_layers"] = 0;
  EXPECT_EQ(parse(j).sliding_window, 128);
}

TEST(ModelConfig, MistralSlidingWindow) {
  json j = base_config();
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  j["sliding_window"] = 256;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.architecture, "MistralForCausalLM");
  EXPECT_EQ(c.sliding_window, 256);
  j["sliding_window"] = nullptr;
  EXPECT_EQ(parse(j).sliding_window, 0);
}

TEST(ModelConfig, ParsesLlama3RopeScaling) {
  json j = base_config();
  j["rope_theta"] = 500000.0;
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
}

TEST(ModelConfig, ParsesLinearRopeScalingWithOldTypeKey) {
  json j = base_config();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.rope_scaling.type, "linear");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);
}

TEST(ModelConfig, UnsupportedRopeScalingIsNamed) {
  json j = base_config();
  j["rope_scaling"] = {{"rope_type", "ntk"}, {"factor", 4.0}};
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("ntk"), std::string::npos) << msg;
  EXPECT_NE(msg.find("rope_scaling"), std::string::npos) << msg;
}

TEST(ModelConfig, UnknownArchitectureIsNamed) {
  json j = base_config();
  j["architectures"] = {"GPTNeoXForCausalLM"};
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("GPTNeoXForCausalLM"), std::string::npos) << msg;
  EXPECT_NE(msg.find("models/x/config.json"), std::string::npos) << msg;
}

TEST(ModelConfig, HiddenActGeluIsRejected) {
  json j = base_config();
  j["hidden_act"] = "gelu";
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("hidden_act"), std::string::npos) << msg;
  EXPECT_NE(msg.find("gelu"), std::string::npos) << msg;
}

TEST(ModelConfig, MlpBiasIsLlamaOnly) {
  json j = base_config();
  j["mlp_bias"] = true;
  EXPECT_TRUE(parse(j).mlp_bias);
  j["architectures"] = {"MistralForCausalLM"};
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("mlp_bias"), std::string::npos) << msg;
  EXPECT_NE(msg.find("MistralForCausalLM"), std::string::npos) << msg;
}

// ---- families beyond Llama --------------------------------------------------------------------

TEST(ModelConfig, Qwen3HasQkNormAndItsOwnHeadDim) {
  json j = base_config();
  j["architectures"] = {"Qwen3ForCausalLM"};
  j.erase("model_type");
  j["head_dim"] = 32;  // != 64 / 8
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.model_type, "qwen3");
}

namespace {
json phi3_longrope_config() {
  json j = base_config();
  j["architectures"] = {"Phi3ForCausalLM"};
  j["max_position_embeddings"] = 512;
  j["original_max_position_embeddings"] = 128;
  j["rope_scaling"] = {{"type", "su"}, {"short_factor", std::vector<double>(4, 2.0)},
                       {"long_factor", std::vector<double>(4, 8.0)}};
  return j;
}
}  // namespace

TEST(ModelConfig, Phi3IsFusedWithLongropeShortFactorsWithinTheOriginalContext) {
  json j = phi3_longrope_config();
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.fused_projections);
  EXPECT_EQ(c.rope_scaling.type, "longrope");
  EXPECT_NEAR(tpbatch::rope_attention_factor(c), std::sqrt(1.0 + std::log(4.0) / std::log(128.0)), 1e-12);
  const auto inv = tpbatch::rope_inverse_frequencies(c);
  EXPECT_NEAR(inv[1], 1.0 / std::pow(10000.0, 2.0 / 8.0) / 2.0, 1e-15);
  j["rope_scaling"]["short_factor"] = {1.0};
  EXPECT_NE(error_of(j).find("short_factor"), std::string::npos);
}

TEST(ModelConfig, LongropeKeepsTheWholeContextAndSwitchesToTheLongFactorsPastTheOriginal) {
  const ModelConfig c = parse(phi3_longrope_config());
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_EQ(tpbatch::rope_long_factors_after(c), 128);
  const auto inv = tpbatch::rope_long_inverse_frequencies(c);
  EXPECT_NEAR(inv[1], 1.0 / std::pow(10000.0, 2.0 / 8.0) / 8.0, 1e-15);
}

TEST(ModelConfig, LongropeWithoutALongerContextNeverSwitches) {
  json j = phi3_longrope_config();
  j["max_position_embeddings"] = 128;
  const ModelConfig c = parse(j);
  EXPECT_EQ(tpbatch::rope_long_factors_after(c), 0);
  EXPECT_DOUBLE_EQ(tpbatch::rope_attention_factor(c), 1.0);
  json llama = base_config();
  EXPECT_EQ(tpbatch::rope_long_factors_after(parse(llama)), 0);
}

TEST(ModelConfig, YarnFrequenciesRampBetweenTheCorrectionDimensions) {
  json j = base_config();
  j["head_dim"] = 64;
  j["max_position_embeddings"] = 4096;
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 1024}};
  const ModelConfig c = parse(j);
  EXPECT_NEAR(tpbatch::rope_attention_factor(c), 0.1 * std::log(4.0) + 1.0, 1e-12);
  EXPECT_NEAR(tpbatch::attention_score_scale(c), std::pow(0.1 * std::log(4.0) + 1.0, 2) / 8.0, 1e-12);
  const auto inv = tpbatch::rope_inverse_frequencies(c);
  // correction dims for 1024 positions, base 1e4, dim 64: floor(5.66) = 5 (beta_fast 32) and
  // ceil(17.70) = 18 (beta_slow 1).
  EXPECT_DOUBLE_EQ(inv[0], 1.0);                                         // extrapolated
  EXPECT_NEAR(inv[31], 1.0 / std::pow(10000.0, 62.0 / 64.0) / 4.0, 1e-18);  // interpolated
  const double f17 = 1.0 / std::pow(10000.0, 34.0 / 64.0), ramp = (17.0 - 5.0) / 13.0;
  EXPECT_NEAR(inv[17], f17 / 4.0 * ramp + f17 * (1.0 - ramp), 1e-15);
}

TEST(ModelConfig, DynamicNtkIsTheDefaultRopeWithinTheContext) {
  json j = base_config();
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  const ModelConfig c = parse(j);
  json plain = base_config();
  EXPECT_EQ(tpbatch::rope_inverse_frequencies(c), tpbatch::rope_inverse_frequencies(parse(plain)));
  j["rope_scaling"]["original_max_position_embeddings"] = 128;
  EXPECT_NE(error_of(j).find("dynamic"), std::string::npos);
}

TEST(ModelConfig, Gemma2AlternatesLocalAndGlobalLayersAndSoftCaps) {
  json j = base_config();
  j["architectures"] = {"Gemma2ForCausalLM"};
  j["num_hidden_layers"] = 4;
  j["head_dim"] = 16;
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["sliding_window"] = 8;
  j["query_pre_attn_scalar"] = 32;
  j["attn_logit_softcapping"] = 50.0;
  j["final_logit_softcapping"] = 30.0;
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.norm_plus_one && c.sandwich_norms && c.tie_word_embeddings);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(c.embedding_scale, 8.0);
  EXPECT_DOUBLE_EQ(tpbatch::attention_score_scale(c), 1.0 / std::sqrt(32.0));
  EXPECT_EQ(tpbatch::layer_window(c, 0), 8);
  EXPECT_EQ(tpbatch::layer_window(c, 1), 0);
  EXPECT_EQ(tpbatch::layer_window(c, 2), 8);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 50.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 30.0);
  j["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  const ModelConfig d = parse(j);
  EXPECT_EQ(tpbatch::layer_window(d, 0), 0);
  EXPECT_EQ(tpbatch::layer_window(d, 1), 8);
}

TEST(ModelConfig, GemmaIsGemma2sBlockWithoutSandwichNormsWindowsOrSoftCaps) {
  json j = base_config();
  j["architectures"] = {"GemmaForCausalLM"};
  j.erase("model_type");
  j["head_dim"] = 16;
  j["num_key_value_heads"] = 1;  // the 2B's multi-query attention
  j["hidden_activation"] = "gelu_pytorch_tanh";
  // Gemma 2's keys, if a config carries them, are not Gemma's: transformers' GemmaModel reads none.
  j["sliding_window"] = 8;
  j["query_pre_attn_scalar"] = 32;
  j["attn_logit_softcapping"] = 50.0;
  j["final_logit_softcapping"] = 30.0;
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.model_type, "gemma");
  EXPECT_TRUE(c.norm_plus_one && c.tie_word_embeddings);
  EXPECT_FALSE(c.sandwich_norms || c.qk_norm);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_DOUBLE_EQ(c.embedding_scale, 8.0);
  EXPECT_DOUBLE_EQ(tpbatch::attention_score_scale(c), 1.0 / std::sqrt(16.0));
  EXPECT_EQ(tpbatch::layer_window(c, 0), 0);
  EXPECT_DOUBLE_EQ(c.attn_logit_softcap, 0.0);
  EXPECT_DOUBLE_EQ(c.final_logit_softcap, 0.0);
}

TEST(ModelConfig, GemmaWithoutHiddenActivationUsesTheTanhGeluItWasTrainedWith) {
  json j = base_config();
  j["architectures"] = {"GemmaForCausalLM"};
  j["hidden_act"] = "gelu";  // google/gemma-2b's first config.json
  EXPECT_EQ(parse(j).hidden_act, "gelu_pytorch_tanh");
  j["hidden_activation"] = "gelu";  // exact GeLU asked for by name: not implemented, refused
  EXPECT_NE(error_of(j).find("hidden_activation"), std::string::npos);
}

TEST(ModelConfig, Gemma3LocalLayersHaveTheirOwnUnscaledRopeBase) {
  json j = base_config();
  j["architectures"] = {"Gemma3ForCausalLM"};
  j["num_hidden_layers"] = 6;
  j["sliding_window"] = 8;
  j["rope_theta"] = 1e6;
  j["rope_local_base_freq"] = 1e4;
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 8.0}};
  const ModelConfig c = parse(j);
  EXPECT_TRUE(c.qk_norm);
  for (int l = 0; l < 5; ++l) EXPECT_EQ(tpbatch::layer_window(c, l), 8) << l;  // pattern 6
  EXPECT_EQ(tpbatch::layer_window(c, 5), 0);
  const auto global = tpbatch::rope_inverse_frequencies(c), local = tpbatch::rope_local_inverse_frequencies(c);
  EXPECT_NEAR(global[1], 1.0 / std::pow(1e6, 2.0 / 8.0) / 8.0, 1e-15);
  EXPECT_NEAR(local[1], 1.0 / std::pow(1e4, 2.0 / 8.0), 1e-15);
  j["architectures"] = {"Gemma3ForConditionalGeneration"};
  EXPECT_NE(error_of(j).find("Gemma3ForConditionalGeneration"), std::string::npos);
}

TEST(ModelConfig, MissingKeyNamesFileAndKey) {
  json j = base_config();
  j.erase("intermediate_size");
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("models/x/config.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("intermediate_size"), std::string::npos) << msg;
}

TEST(ModelConfig, MistypedKeyIsNamed) {
  json j = base_config();
  j["hidden_size"] = "64";
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("hidden_size"), std::string::npos) << msg;
  j = base_config();
  j["tie_word_embeddings"] = 1;
  EXPECT_NE(error_of(j).find("tie_word_embeddings"), std::string::npos);
}

TEST(ModelConfig, NonPositiveSizeIsRejected) {
  json j = base_config();
  j["num_hidden_layers"] = 0;
  EXPECT_NE(error_of(j).find("num_hidden_layers"), std::string::npos);
  j = base_config();
  j["vocab_size"] = -5;
  EXPECT_NE(error_of(j).find("vocab_size"), std::string::npos);
}

TEST(ModelConfig, HeadsNotDividingHiddenIsRejected) {
  json j = base_config();
  j["num_attention_heads"] = 6;
  j["num_key_value_heads"] = 2;
  const std::string msg = error_of(j);
  EXPECT_NE(msg.find("num_attention_heads"), std::string::npos) << msg;
  j["head_dim"] = 8;  // explicit head_dim: fine
  EXPECT_EQ(error_of(j), "");
}

TEST(ModelConfig, HeadsNotMultipleOfKvHeadsIsRejected) {
  json j = base_config();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("num_key_value_heads"), std::string::npos);
}

TEST(ModelConfig, EosOutsideVocabularyIsRejected) {
  json j = base_config();
  j["eos_token_id"] = 512;
  EXPECT_NE(error_of(j).find("eos_token_id"), std::string::npos);
}

TEST(ModelConfig, BadJsonNamesFile) {
  const std::string msg = [] {
    try {
      parse_model_config("{ not json", "", "models/x");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  EXPECT_NE(msg.find("models/x/config.json"), std::string::npos) << msg;
  json j = base_config();
  EXPECT_NE(error_of(j, "[1, 2").find("generation_config.json"), std::string::npos);
  EXPECT_NE(error_of(json::array({1, 2})).find("config.json"), std::string::npos);
}

TEST_F(ModelConfigFiles, LoadsFolderWithGenerationConfig) {
  json j = base_config();
  write("config.json", j.dump());
  write("generation_config.json", R"({"eos_token_id": [2, 3]})");
  const ModelConfig c = tpbatch::load_model_config(dir_);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>({2, 3}));
}

TEST_F(ModelConfigFiles, MissingFolderOrFileIsAnError) {
  try {
    tpbatch::load_model_config(dir_ / "nope");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nope"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), 1);
  }
  try {
    tpbatch::load_model_config(dir_);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
  }
}

TEST(Rope, PlainInverseFrequencies) {
  ModelConfig c = parse(base_config());
  c.rope_theta = 10000.0;
  const auto inv = tpbatch::rope_inverse_frequencies(c);
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  EXPECT_NEAR(inv[1], 0.1, 1e-15);
  EXPECT_NEAR(inv[2], 0.01, 1e-16);
  EXPECT_NEAR(inv[3], 0.001, 1e-17);
}

TEST(Rope, Llama3ScalingMatchesHandComputedValues) {
  // head_dim 8, theta 1e4: inv = 1, 0.1, 0.01, 0.001; wavelengths 2*pi/inv = 6.28, 62.8, 628, 6283.
  // original 1024, low 1, high 4 => low_freq_wavelen 1024, high_freq_wavelen 256:
  // 6.28 and 62.8 are high-frequency (unchanged), 6283 low-frequency (/8), 628 is smoothed:
  // s = (1024/628.3185 - 1) / 3 = 0.2099..., (1 - s) * 0.01 / 8 + s * 0.01 = 0.0030867609670...
  json j = base_config();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 1024}};
  const auto inv = tpbatch::rope_inverse_frequencies(parse(j));
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_DOUBLE_EQ(inv[0], 1.0);
  EXPECT_NEAR(inv[1], 0.1, 1e-15);
  EXPECT_NEAR(inv[2], 0.003086760967011274, 1e-15);
  EXPECT_NEAR(inv[3], 0.000125, 1e-17);
}

TEST(Rope, LinearScalingDividesByFactor) {
  json j = base_config();
  j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  const auto inv = tpbatch::rope_inverse_frequencies(parse(j));
  ASSERT_EQ(inv.size(), 4u);
  EXPECT_DOUBLE_EQ(inv[0], 0.25);
  EXPECT_NEAR(inv[3], 0.00025, 1e-17);
}
