// Mixture of experts: Mixtral / Qwen3-MoE / Qwen2-MoE config keys and refusals, the host
// routing (softmax, top-k, renormalisation, grouping by expert) and the CPU weighted_row_sum.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/backend.h"
#include "common/error.h"
#include "model/config.h"
#include "model/moe.h"
#include "model/shard_bytes.h"

namespace tpbatch {
namespace {

using nlohmann::json;

json moe_config(const std::string& arch) {
  json c{{"architectures", {arch}},   {"hidden_size", 64},         {"intermediate_size", 128},
         {"num_hidden_layers", 4},    {"num_attention_heads", 4},  {"num_key_value_heads", 2},
         {"vocab_size", 512},         {"max_position_embeddings", 512}, {"num_experts_per_tok", 2}};
  if (arch == "MixtralForCausalLM") {
    c["num_local_experts"] = 4;
  } else {
    c["num_experts"] = 4;
    c["moe_intermediate_size"] = 48;
  }
  return c;
}

ModelConfig parse(const json& c) { return parse_model_config(c.dump(), "", "m"); }

void expect_refused(const json& c, const std::string& word) {
  try {
    parse(c);
    FAIL() << "accepted; wanted a message naming " << word;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

TEST(MoeConfig, MixtralEveryLayerSparseAlwaysRenormalisedNullWindow) {
  json c = moe_config("MixtralForCausalLM");
  c["sliding_window"] = nullptr;
  c["norm_topk_prob"] = false;  // not a Mixtral key: Mixtral always renormalises
  c["router_jitter_noise"] = 0.1;  // training only
  const ModelConfig m = parse(c);
  EXPECT_EQ(m.model_type, "mixtral");
  EXPECT_EQ(m.num_experts, 4);
  EXPECT_EQ(m.experts_per_token, 2);
  EXPECT_EQ(m.expert_intermediate_size, 128);
  EXPECT_TRUE(m.norm_topk_prob);
  EXPECT_EQ(m.sliding_window, 0);
  for (int l = 0; l < 4; ++l) EXPECT_TRUE(m.is_moe_layer(l));
  EXPECT_FALSE(m.qk_norm);
  c["sliding_window"] = 16;
  EXPECT_EQ(parse(c).sliding_window, 16);
}

TEST(MoeConfig, Qwen3MoeDenseLayersBySparseStepAndMlpOnlyLayers) {
  json c = moe_config("Qwen3MoeForCausalLM");
  ModelConfig m = parse(c);
  EXPECT_EQ(m.model_type, "qwen3_moe");
  EXPECT_TRUE(m.qk_norm);
  EXPECT_FALSE(m.norm_topk_prob);  // Qwen3MoeConfig's default
  EXPECT_EQ(m.expert_intermediate_size, 48);
  c["norm_topk_prob"] = true;
  c["decoder_sparse_step"] = 2;  // layers 1 and 3 sparse (transformers: (i + 1) % step == 0)
  c["mlp_only_layers"] = {3};
  m = parse(c);
  EXPECT_TRUE(m.norm_topk_prob);
  EXPECT_FALSE(m.is_moe_layer(0));
  EXPECT_TRUE(m.is_moe_layer(1));
  EXPECT_FALSE(m.is_moe_layer(2));
  EXPECT_FALSE(m.is_moe_layer(3));
  c["num_experts"] = 0;  // no experts: a dense model
  m = parse(c);
  for (int l = 0; l < 4; ++l) EXPECT_FALSE(m.is_moe_layer(l));
}

TEST(MoeConfig, Qwen2MoeHasASharedExpertBesideTheRoutedOnesAndQkvBiases) {
  json c = moe_config("Qwen2MoeForCausalLM");
  c["shared_expert_intermediate_size"] = 256;
  ModelConfig m = parse(c);
  EXPECT_EQ(m.model_type, "qwen2_moe");
  EXPECT_EQ(m.shared_expert_intermediate_size, 256);
  EXPECT_TRUE(m.attention_bias);
  EXPECT_FALSE(m.qk_norm);
  EXPECT_FALSE(m.norm_topk_prob);
  c.erase("shared_expert_intermediate_size");
  EXPECT_EQ(parse(c).shared_expert_intermediate_size, 5632);  // Qwen2MoeConfig's default
  c["num_experts"] = 0;  // no experts: dense layers, and no shared expert either
  m = parse(c);
  EXPECT_EQ(m.shared_expert_intermediate_size, 0);
  EXPECT_FALSE(m.is_moe_layer(0));
}

TEST(MoeConfig, UnsupportedOrInconsistentOptionsNameTheKey) {
  json c = moe_config("Qwen3MoeForCausalLM");
  c["shared_expert_intermediate_size"] = 256;
  expect_refused(c, "shared_expert_intermediate_size");
  c = moe_config("MixtralForCausalLM");
  c["num_experts_per_tok"] = 5;
  expect_refused(c, "num_experts_per_tok");
  c = moe_config("Qwen3MoeForCausalLM");
  c["mlp_only_layers"] = {7};
  expect_refused(c, "mlp_only_layers");
  c = moe_config("Qwen3MoeForCausalLM");
  c["decoder_sparse_step"] = 0;
  expect_refused(c, "decoder_sparse_step");
  c = moe_config("MixtralForCausalLM");
  c["num_local_experts"] = 0;
  expect_refused(c, "num_local_experts");
}

TEST(MoeConfig, PlanWeightBytesCountTheRouterAndEveryExpertSlice) {
  // Mixtral: 4 layers, each router [4, 64] + 4 experts x 3 x [128, 64] instead of a dense MLP.
  const ModelConfig m = parse(moe_config("MixtralForCausalLM"));
  ShardPlacement p;
  p.layers = Range{0, 4};
  p.has_embedding = p.has_lm_head = true;
  const int64_t H = 64, attn = (64 + 2 * 32) * H + H * 64, vocab = 2 * 512 * H;
  const int64_t f32 = 4 * 2 * H + 8 + H;  // norms, rope table [head_dim / 2], final norm
  EXPECT_EQ(shard_weight_bytes(m, p, DType::F32), 4 * (4 * (attn + 4 * H + 4 * 3 * 128 * H) + vocab) + 4 * f32);
  // TP=2, rank 1: half of each expert, the whole router, half the heads and vocabulary.
  p.tensor = 2, p.tp_rank = 1;
  const int64_t attn2 = (32 + 2 * 16) * H + H * 32;
  EXPECT_EQ(shard_weight_bytes(m, p, DType::F32), 4 * (4 * (attn2 + 4 * H + 4 * 3 * 64 * H) + vocab / 2) + 4 * f32);
}

TEST(MoeConfig, PlanWeightBytesCountTheSharedExpertSliceAndItsGate) {
  json c = moe_config("Qwen2MoeForCausalLM");
  c["shared_expert_intermediate_size"] = 96;
  const ModelConfig m = parse(c);
  ShardPlacement p;
  p.layers = Range{0, 4};
  p.has_embedding = p.has_lm_head = true;
  const int64_t H = 64, attn = (64 + 2 * 32) * H + H * 64, vocab = 2 * 512 * H;  // untied (Qwen default)
  const int64_t f32 = 4 * (2 * H + 64 + 2 * 32) + 8 + H;  // norms, q/k/v biases, rope table, final norm
  const int64_t moe = (4 + 1) * H + 4 * 3 * 48 * H + 3 * 96 * H;  // router + gate row, experts, shared
  EXPECT_EQ(shard_weight_bytes(m, p, DType::F32), 4 * (4 * (attn + moe) + vocab) + 4 * f32);
  p.tensor = 2, p.tp_rank = 1;  // half of each routed expert and of the shared one
  const int64_t attn2 = (32 + 2 * 16) * H + H * 32, moe2 = (4 + 1) * H + 4 * 3 * 24 * H + 3 * 48 * H;
  const int64_t f32_2 = 4 * (2 * H + 32 + 2 * 16) + 8 + H;
  EXPECT_EQ(shard_weight_bytes(m, p, DType::F32), 4 * (4 * (attn2 + moe2) + vocab / 2) + 4 * f32_2);
}

TEST(MoeRouting, TopKOfTheSoftmaxRenormalisedOrNotAndGroupedByExpert) {
  // Token 0 prefers experts 2 then 0; token 1 experts 1 then 2; token 2 ties 0 and 3 (lower id first).
  const std::vector<float> logits = {1.0f, 0.0f, 2.0f, -1.0f,  //
                                     0.0f, 3.0f, 1.0f, 0.0f,   //
                                     0.5f, 0.0f, 0.0f, 0.5f};
  for (bool renorm : {true, false}) {
    const MoeRouting r = route_tokens(logits, 3, 4, 2, renorm);
    EXPECT_EQ(r.token_expert, (std::vector<int32_t>{2, 0, 1, 2, 0, 3}));
    auto softmax = [&](int t, int e) {
      double s = 0;
      for (int j = 0; j < 4; ++j) s += std::exp(double(logits[t * 4 + j]));
      return std::exp(double(logits[t * 4 + e])) / s;
    };
    const double p20 = softmax(0, 2), p00 = softmax(0, 0);
    EXPECT_NEAR(r.token_weight[0], renorm ? p20 / (p20 + p00) : p20, 1e-6);
    EXPECT_NEAR(r.token_weight[1], renorm ? p00 / (p20 + p00) : p00, 1e-6);
    if (renorm)
      for (int t = 0; t < 3; ++t) EXPECT_NEAR(r.token_weight[2 * t] + r.token_weight[2 * t + 1], 1.0, 1e-6);
    // Expert 0: tokens 0, 2; expert 1: token 1; expert 2: tokens 0, 1; expert 3: token 2.
    EXPECT_EQ(r.expert_begin, (std::vector<int64_t>{0, 2, 3, 5, 6}));
    EXPECT_EQ(r.slot_token, (std::vector<int64_t>{0, 2, 1, 0, 1, 2}));
    for (size_t i = 0; i < r.token_slot.size(); ++i) {
      EXPECT_EQ(r.slot_token[size_t(r.token_slot[i])], int64_t(i / 2));
      const int32_t e = r.token_expert[i];
      EXPECT_GE(r.token_slot[i], r.expert_begin[size_t(e)]);
      EXPECT_LT(r.token_slot[i], r.expert_begin[size_t(e + 1)]);
    }
  }
  EXPECT_THROW(route_tokens(logits, 3, 4, 5, true), Error);
}

TEST(MoeBackend, WeightedRowSumOnTheCpu) {
  auto be = make_cpu_backend(CpuBackendOptions{true});  // checked: no host access outside the backend
  const std::vector<float> src = {1, 2, 3, 10, 20, 30, 100, 200, 300};  // 3 rows of 3
  Buffer s = be->alloc(9, DType::F32), out = be->alloc(6, DType::F32);
  be->upload(s.view(), src.data(), src.size() * 4);
  const std::vector<int64_t> rows = {2, 0, 1, 1};
  const std::vector<float> w = {0.5f, 2.0f, 1.0f, -1.0f};
  be->weighted_row_sum(s.view(), rows, w, 2, 3, out.view());
  std::vector<float> got(6);
  be->download(out.view(), got.data(), 24);
  EXPECT_EQ(got, (std::vector<float>{52, 104, 156, 0, 0, 0}));
  EXPECT_THROW(be->weighted_row_sum(s.view(), rows, std::vector<float>{1.0f}, 2, 3, out.view()), Error);
}

}  // namespace
}  // namespace tpbatch
