// make_model: synthetic Hugging Face model folders.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "temp_dir_test.h"
#include "common/error.h"
#include "model/config.h"
#include "model/rope_frequencies.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"
#include "tools/make_model.h"
#include "tools/make_tokenizer.h"

namespace fs = std::filesystem;
using nlohmann::json;
using tpbatch::Error;
using tpbatch::MakeModelOptions;
using tpbatch::ModelConfig;
using tpbatch::WeightStore;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every tensor a Llama-family model of this config must have, with its shape.
std::map<std::string, std::vector<int64_t>> expected_tensors(const ModelConfig& c) {
  std::map<std::string, std::vector<int64_t>> t;
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  t["model.embed_tokens.weight"] = {c.vocab_size, c.hidden_size};
  if (!c.tie_word_embeddings) t["lm_head.weight"] = {c.vocab_size, c.hidden_size};
  t["model.norm.weight"] = {c.hidden_size};
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    t[p + "input_layernorm.weight"] = {c.hidden_size};
    t[p + "post_attention_layernorm.weight"] = {c.hidden_size};
    t[p + "self_attn.q_proj.weight"] = {q, c.hidden_size};
    t[p + "self_attn.k_proj.weight"] = {kv, c.hidden_size};
    t[p + "self_attn.v_proj.weight"] = {kv, c.hidden_size};
    t[p + "self_attn.o_proj.weight"] = {c.hidden_size, q};
    if (c.attention_bias) {
      t[p + "self_attn.q_proj.bias"] = {q};
      t[p + "self_attn.k_proj.bias"] = {kv};
      t[p + "self_attn.v_proj.bias"] = {kv};
      if (c.architecture == "LlamaForCausalLM") t[p + "self_attn.o_proj.bias"] = {c.hidden_size};
    }
    t[p + "mlp.gate_proj.weight"] = {c.intermediate_size, c.hidden_size};
    t[p + "mlp.up_proj.weight"] = {c.intermediate_size, c.hidden_size};
    t[p + "mlp.down_proj.weight"] = {c.hidden_size, c.intermediate_size};
  }
  return t;
}

void expect_all_tensors(const fs::path& dir, const ModelConfig& c) {
  const WeightStore ws = WeightStore::open(dir);
  const auto expected = expected_tensors(c);
  std::vector<std::string> names;
  for (const auto& [name, shape] : expected) {
    names.push_back(name);
    ASSERT_TRUE(ws.has(name)) << name;
    EXPECT_NO_THROW(ws.expect_shape(name, shape)) << name;
  }
  EXPECT_EQ(ws.names(), names);
}

class MakeModel : public tpbatch::TempDirTest {
 protected:
};

}  // namespace

TEST_F(MakeModel, TinyFolderLoadsWithEveryTensor) {
  tpbatch::make_model(dir_ / "m", {});
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(fs::exists(dir_ / "m" / f)) << f;
  const ModelConfig c = tpbatch::load_model_config(dir_ / "m");
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
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
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>({2}));
  EXPECT_EQ(c.torch_dtype, "float32");
  expect_all_tensors(dir_ / "m", c);
  EXPECT_EQ(WeightStore::open(dir_ / "m").tensor("model.norm.weight").dtype, tpbatch::DType::F32);
}

TEST_F(MakeModel, SafetensorsHeaderIsPaddedToEightBytes) {
  tpbatch::make_model(dir_, {});
  const std::string bytes = slurp(dir_ / "model.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  EXPECT_EQ(n % 8, 0u);
  const json h = json::parse(bytes.substr(8, n));
  EXPECT_EQ(h.at("__metadata__").at("format"), "pt");
}

TEST_F(MakeModel, SameOptionsGiveIdenticalBytes) {
  MakeModelOptions o;
  o.seed = 7;
  tpbatch::make_model(dir_ / "a", o);
  tpbatch::make_model(dir_ / "b", o);
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"})
    EXPECT_TRUE(slurp(dir_ / "a" / f) == slurp(dir_ / "b" / f)) << f;
}

TEST_F(MakeModel, SeedChangesWeightsOnly) {
  MakeModelOptions o;
  o.seed = 1;
  tpbatch::make_model(dir_ / "a", o);
  o.seed = 2;
  tpbatch::make_model(dir_ / "b", o);
  EXPECT_EQ(slurp(dir_ / "a" / "tokenizer.json"), slurp(dir_ / "b" / "tokenizer.json"));
  EXPECT_NE(slurp(dir_ / "a" / "model.safetensors"), slurp(dir_ / "b" / "model.safetensors"));
}

TEST_F(MakeModel, WeightsHaveSaneStatistics) {
  tpbatch::make_model(dir_, {});
  const WeightStore ws = WeightStore::open(dir_);
  auto stats = [&](const std::string& name, int64_t rows, int64_t cols) {
    std::vector<float> v(size_t(rows * cols));
    ws.read_f32(name, 0, rows, 0, cols, v.data());
    double s = 0, s2 = 0;
    for (float x : v) s += x, s2 += double(x) * x;
    const double mean = s / double(v.size());
    return std::pair<double, double>(mean, std::sqrt(s2 / double(v.size()) - mean * mean));
  };
  auto [nm, ns] = stats("model.layers.0.input_layernorm.weight", 1, 64);
  EXPECT_NEAR(nm, 1.0, 0.02);
  EXPECT_LT(ns, 0.05);
  auto [em, es] = stats("model.embed_tokens.weight", 512, 64);
  EXPECT_NEAR(em, 0.0, 0.02);
  EXPECT_NEAR(es, 0.5, 0.05);  // 4 / sqrt(64)
  auto [qm, qs] = stats("model.layers.2.self_attn.q_proj.weight", 64, 64);
  EXPECT_NEAR(qm, 0.0, 0.02);
  EXPECT_NEAR(qs, 0.125, 0.02);  // 1 / sqrt(64)
}

TEST_F(MakeModel, OptionsOverridePresetFields) {
  MakeModelOptions o;
  o.hidden_size = 96;
  o.intermediate_size = 100;
  o.num_layers = 2;
  o.num_heads = 6;
  o.num_kv_heads = 2;
  o.head_dim = 12;
  o.vocab_size = 300;
  o.max_position_embeddings = 128;
  o.tie_word_embeddings = 0;
  tpbatch::make_model(dir_, o);
  const ModelConfig c = tpbatch::load_model_config(dir_);
  EXPECT_EQ(c.hidden_size, 96);
  EXPECT_EQ(c.intermediate_size, 100);
  EXPECT_EQ(c.num_layers, 2);
  EXPECT_EQ(c.num_heads, 6);
  EXPECT_EQ(c.num_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 12);
  EXPECT_EQ(c.vocab_size, 300);
  EXPECT_EQ(c.max_position_embeddings, 128);
  EXPECT_FALSE(c.tie_word_embeddings);
  expect_all_tensors(dir_, c);
}

TEST_F(MakeModel, Qwen2AddsAttentionBiases) {
  MakeModelOptions o;
  o.architecture = "Qwen2ForCausalLM";
  tpbatch::make_model(dir_, o);
  const ModelConfig c = tpbatch::load_model_config(dir_);
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(c.attention_bias);
  EXPECT_EQ(c.sliding_window, 0);
  expect_all_tensors(dir_, c);
}

TEST_F(MakeModel, LlamaAttentionBiasOption) {
  MakeModelOptions o;
  o.attention_bias = true;
  tpbatch::make_model(dir_, o);
  const ModelConfig c = tpbatch::load_model_config(dir_);
  EXPECT_TRUE(c.attention_bias);
  expect_all_tensors(dir_, c);
}

TEST_F(MakeModel, MistralArchitecture) {
  MakeModelOptions o;
  o.architecture = "MistralForCausalLM";
  tpbatch::make_model(dir_, o);
  const ModelConfig c = tpbatch::load_model_config(dir_);
  EXPECT_EQ(c.architecture, "MistralForCausalLM");
  EXPECT_EQ(c.model_type, "mistral");
  expect_all_tensors(dir_, c);
}

TEST_F(MakeModel, Llama3RopeScalingIsWritten) {
  MakeModelOptions o;
  o.rope_scaling = "llama3";
  tpbatch::make_model(dir_, o);
  const ModelConfig c = tpbatch::load_model_config(dir_);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8.0);
  EXPECT_EQ(tpbatch::rope_inverse_frequencies(c).size(), 4u);
}

TEST_F(MakeModel, HalfPrecisionDtypes) {
  for (const char* dtype : {"bfloat16", "float16"}) {
    MakeModelOptions o;
    o.dtype = dtype;
    const fs::path d = dir_ / dtype;
    tpbatch::make_model(d, o);
    const ModelConfig c = tpbatch::load_model_config(d);
    EXPECT_EQ(c.torch_dtype, dtype);
    const WeightStore ws = WeightStore::open(d);
    EXPECT_EQ(ws.tensor("model.embed_tokens.weight").dtype,
              std::string(dtype) == "bfloat16" ? tpbatch::DType::BF16 : tpbatch::DType::F16);
    std::vector<float> norm(64);
    ws.read_f32("model.norm.weight", 0, 1, 0, 64, norm.data());
    for (float x : norm) EXPECT_NEAR(x, 1.0f, 0.2f) << dtype;
    expect_all_tensors(d, c);
  }
}

TEST_F(MakeModel, HalfPrecisionWeightsRoundFromTheFloat32Ones) {
  MakeModelOptions o;
  tpbatch::make_model(dir_ / "f32", o);
  o.dtype = "bfloat16";
  tpbatch::make_model(dir_ / "bf16", o);
  o.dtype = "float16";
  tpbatch::make_model(dir_ / "f16", o);
  const WeightStore a = WeightStore::open(dir_ / "f32"), b = WeightStore::open(dir_ / "bf16"),
                    h = WeightStore::open(dir_ / "f16");
  std::vector<float> x(64 * 64), y(64 * 64), z(64 * 64);
  a.read_f32("model.layers.1.self_attn.o_proj.weight", 0, 64, 0, 64, x.data());
  b.read_f32("model.layers.1.self_attn.o_proj.weight", 0, 64, 0, 64, y.data());
  h.read_f32("model.layers.1.self_attn.o_proj.weight", 0, 64, 0, 64, z.data());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], x[i], std::abs(x[i]) / 256 + 1e-30) << i;
    EXPECT_NEAR(z[i], x[i], std::abs(x[i]) / 2048 + 1e-7) << i;
  }
}

TEST_F(MakeModel, TokenizerJsonHasExactlyVocabSizeEntries) {
  MakeModelOptions o;
  o.vocab_size = 1000;
  tpbatch::make_model(dir_, o);
  const json t = json::parse(slurp(dir_ / "tokenizer.json"));
  const json& vocab = t.at("model").at("vocab");
  ASSERT_EQ(vocab.size(), 1000u);
  std::set<int64_t> ids;
  for (const auto& [piece, id] : vocab.items()) ids.insert(id.get<int64_t>());
  EXPECT_EQ(ids.size(), 1000u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 999);
  EXPECT_EQ(vocab.at("<unk>"), 0);
  EXPECT_EQ(vocab.at("<s>"), 1);
  EXPECT_EQ(vocab.at("</s>"), 2);
  EXPECT_EQ(vocab.at("<0x00>"), 3);
  EXPECT_EQ(vocab.at("<0xFF>"), 258);
  EXPECT_EQ(vocab.at("\xe2\x96\x81"), 259);
  EXPECT_TRUE(vocab.contains("e"));
  EXPECT_TRUE(vocab.contains("~"));
  EXPECT_TRUE(t.at("model").at("byte_fallback").get<bool>());
  EXPECT_TRUE(t.at("model").at("fuse_unk").get<bool>());
  EXPECT_EQ(t.at("added_tokens").size(), 3u);
  EXPECT_EQ(t.at("post_processor").at("type"), "TemplateProcessing");
  EXPECT_EQ(t.at("decoder").at("decoders").size(), 4u);
}

TEST(MakeModelTokenizer, EveryMergeJoinsTwoPiecesIntoAPiece) {
  for (int64_t v : {260, 300, 512, 32000}) {
    const auto sv = tpbatch::build_synthetic_vocab(v);
    ASSERT_EQ(int64_t(sv.pieces.size()), v);
    const std::set<std::string> pieces(sv.pieces.begin(), sv.pieces.end());
    EXPECT_EQ(int64_t(pieces.size()), v) << "duplicate pieces at vocab " << v;
    std::set<std::pair<std::string, std::string>> seen;
    for (const auto& [a, b] : sv.merges) {
      EXPECT_TRUE(pieces.count(a)) << a;
      EXPECT_TRUE(pieces.count(b)) << b;
      EXPECT_TRUE(pieces.count(a + b)) << a << b;
      EXPECT_TRUE(seen.insert({a, b}).second) << "duplicate merge " << a << " " << b;
    }
    if (v >= 512) EXPECT_GT(sv.merges.size(), 100u);
  }
}

TEST(MakeModelTokenizer, LearnsCommonEnglishWords) {
  const auto sv = tpbatch::build_synthetic_vocab(512);
  const std::set<std::string> pieces(sv.pieces.begin(), sv.pieces.end());
  for (const char* w : {"\xe2\x96\x81" "the", "\xe2\x96\x81" "and", "\xe2\x96\x81" "was", "\xe2\x96\x81" "Lily"})
    EXPECT_TRUE(pieces.count(w)) << w;
}

TEST_F(MakeModel, TokenizerRoundTripsText) {
  tpbatch::make_model(dir_, {});
  const auto tok = tpbatch::Tokenizer::load(dir_ / "tokenizer.json");
  ASSERT_EQ(tok->vocab_size(), 512);
  const std::string text = "Once upon a time, Lily saw a big dog. Zebra {x} 42 \xc3\xa9!";
  const auto ids = tok->encode(text, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], 1);
  EXPECT_LT(ids.size(), text.size());  // merges are used
  EXPECT_EQ(tok->decode(ids, true), text);
}

TEST_F(MakeModel, BadOptionsAreRejected) {
  auto error_of = [&](const MakeModelOptions& o) {
    try {
      tpbatch::make_model(dir_ / "x", o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  MakeModelOptions o;
  o.vocab_size = 200;
  EXPECT_NE(error_of(o).find("vocab_size"), std::string::npos);
  o = {};
  o.preset = "70b";
  EXPECT_NE(error_of(o).find("70b"), std::string::npos);
  o = {};
  o.architecture = "GPT2LMHeadModel";
  EXPECT_NE(error_of(o).find("GPT2LMHeadModel"), std::string::npos);
  o = {};
  o.num_kv_heads = 3;
  EXPECT_NE(error_of(o).find("num_kv_heads"), std::string::npos);
  o = {};
  o.dtype = "int8";
  EXPECT_NE(error_of(o).find("int8"), std::string::npos);
  o = {};
  o.rope_scaling = "yarn";
  EXPECT_NE(error_of(o).find("yarn"), std::string::npos);
}

TEST_F(MakeModel, Preset125mGeneratesQuickly) {
  MakeModelOptions o;
  o.preset = "125m";
  const auto t0 = std::chrono::steady_clock::now();
  tpbatch::make_model(dir_, o);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 20.0);
  const ModelConfig c = tpbatch::load_model_config(dir_);
  EXPECT_EQ(c.hidden_size, 768);
  EXPECT_EQ(c.num_layers, 12);
  EXPECT_EQ(c.num_heads, 12);
  EXPECT_EQ(c.num_kv_heads, 4);
  EXPECT_EQ(c.intermediate_size, 2048);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.max_position_embeddings, 2048);
  EXPECT_FALSE(c.tie_word_embeddings);
  expect_all_tensors(dir_, c);
  const json t = json::parse(slurp(dir_ / "tokenizer.json"));
  EXPECT_EQ(t.at("model").at("vocab").size(), 32000u);
}
