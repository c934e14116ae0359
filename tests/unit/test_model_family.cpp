// The model-family table: every row is an architecture config.json may name, parsed with the
// features its row gives; a name outside the table is refused with the table's list.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "common/error.h"
#include "model/config.h"
#include "model/model_family.h"

using namespace tpbatch;
using nlohmann::json;

namespace {

ModelConfig parse_as(const std::string& architecture) {
  json j{{"architectures", {architecture}},
         {"hidden_size", 64},
         {"intermediate_size", 172},
         {"num_hidden_layers", 2},
         {"num_attention_heads", 8},
         {"num_key_value_heads", 4},
         {"vocab_size", 512},
         {"max_position_embeddings", 512}};
  return parse_model_config(j.dump(), "", "m");
}

}  // namespace

TEST(ModelFamily, ArchitectureNamesAreUnique) {
  std::set<std::string> names;
  for (const ModelFamily& f : model_families()) EXPECT_TRUE(names.insert(f.architecture).second) << f.architecture;
}

TEST(ModelFamily, EveryRowParsesWithTheFeaturesItGives) {
  for (const ModelFamily& f : model_families()) {
    SCOPED_TRACE(f.architecture);
    const ModelConfig c = parse_as(f.architecture);
    EXPECT_EQ(c.model_type, f.model_type);
    EXPECT_EQ(c.hidden_act, f.activation);
    EXPECT_EQ(c.tie_word_embeddings, f.tied_embeddings);
    EXPECT_EQ(c.attention_bias, f.attention_bias == AttentionBiasRule::kAlways ||
                                    f.attention_bias == AttentionBiasRule::kFromQkvBias);
    EXPECT_EQ(c.fused_projections, f.fused_projections);
    EXPECT_EQ(c.qk_norm, f.qk_norm);
    EXPECT_EQ(c.norm_plus_one, f.gemma_norms);
    EXPECT_EQ(c.sandwich_norms, f.sandwich_norms);
    EXPECT_EQ(c.rope_local_theta > 0, f.local_rope_base);
    EXPECT_EQ(c.num_experts > 0, f.moe != MoeRule::kDense);
    EXPECT_EQ(c.shared_expert_intermediate_size > 0, f.moe == MoeRule::kQwen2Moe);
  }
}

TEST(ModelFamily, MlpBiasIsRefusedOutsideTheRowsThatAllowIt) {
  for (const ModelFamily& f : model_families()) {
    json j{{"architectures", {f.architecture}}, {"hidden_size", 64}, {"intermediate_size", 172},
           {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"vocab_size", 512},
           {"max_position_embeddings", 512}, {"mlp_bias", true}};
    if (f.mlp_bias)
      EXPECT_TRUE(parse_model_config(j.dump(), "", "m").mlp_bias) << f.architecture;
    else
      EXPECT_THROW(parse_model_config(j.dump(), "", "m"), Error) << f.architecture;
  }
}

TEST(ModelFamily, AnUnknownArchitectureIsRefusedListingTheTable) {
  try {
    parse_as("GPTNeoXForCausalLM");
    FAIL() << "accepted";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("unsupported architecture 'GPTNeoXForCausalLM'"), std::string::npos) << msg;
    for (const ModelFamily& f : model_families())
      EXPECT_NE(msg.find(f.architecture), std::string::npos) << f.architecture << " not in: " << msg;
  }
}

TEST(ModelFamily, FindingANameOutsideTheTableGivesNone) {
  EXPECT_EQ(find_model_family("GPTNeoXForCausalLM"), nullptr);
  EXPECT_EQ(find_model_family("llamaforcausallm"), nullptr);
  EXPECT_NE(find_model_family("LlamaForCausalLM"), nullptr);
}
