// Rank layout arithmetic and Megatron shard ranges.
#include <gtest/gtest.h>

#include "topology/layout.h"

namespace {

using tpbatch::Layout;
using tpbatch::ModelConfig;

ModelConfig heads(int64_t q, int64_t kv, int64_t layers = 5) {
  ModelConfig c;
  c.num_heads = q;
  c.num_kv_heads = kv;
  c.num_layers = layers;
  return c;
}

TEST(Layout, TensorVariesFastestThenPipelineThenData) {
  Layout l{16, 2, 4};
  for (int r = 0; r < 16; ++r) EXPECT_EQ(tpbatch::world_rank_of(l, tpbatch::coords_of(l, r)), r);
  const auto c = tpbatch::coords_of(l, 11);  // 11 = (1*4 + 1)*2 + 1
  EXPECT_EQ(c.dp, 1);
  EXPECT_EQ(c.pp, 1);
  EXPECT_EQ(c.tp, 1);
}

TEST(Layout, ImpossibleLayoutsNameTheReason) {
  EXPECT_NE(tpbatch::layout_problem(Layout{3, 3, 1}, heads(8, 4)).find("attention heads"), std::string::npos);
  EXPECT_NE(tpbatch::layout_problem(Layout{3, 2, 1}, heads(8, 4)).find("world size 3"), std::string::npos);
  EXPECT_NE(tpbatch::layout_problem(Layout{16, 16, 1}, heads(8, 4)).find("exceeds"), std::string::npos);
  EXPECT_NE(tpbatch::layout_problem(Layout{6, 1, 6}, heads(8, 4)).find("layers"), std::string::npos);
  EXPECT_EQ(tpbatch::layout_problem(Layout{8, 8, 1}, heads(8, 4)), "");
  EXPECT_EQ(tpbatch::layout_problem(Layout{8, 2, 2}, heads(8, 4)), "");
}

TEST(Layout, BalancedSplitCoversEveryIndexOnce) {
  int64_t total = 0, prev_end = 0;
  for (int r = 0; r < 8; ++r) {
    const auto s = tpbatch::balanced_split(172, 8, r);
    EXPECT_EQ(s.begin, prev_end);
    EXPECT_GE(s.size(), 21);
    EXPECT_LE(s.size(), 22);
    prev_end = s.end;
    total += s.size();
  }
  EXPECT_EQ(total, 172);
}

TEST(Layout, KvHeadsAreReplicatedWhenTensorExceedsThem) {
  const auto c = heads(8, 2);
  EXPECT_EQ(tpbatch::kv_heads_of_rank(c, 2, 1).begin, 1);  // TP 2: one head each
  for (int r = 0; r < 8; ++r) {                            // TP 8: each head on 4 ranks
    const auto s = tpbatch::kv_heads_of_rank(c, 8, r);
    EXPECT_EQ(s.size(), 1);
    EXPECT_EQ(s.begin, r / 4);
  }
}

TEST(Layout, StagesTakeContiguousLayersEarlierOnesTheExtra) {
  EXPECT_EQ(tpbatch::layers_of_stage(5, 2, 0).size(), 3);
  EXPECT_EQ(tpbatch::layers_of_stage(5, 2, 1).begin, 3);
  EXPECT_EQ(tpbatch::layers_of_stage(5, 2, 1).end, 5);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(tpbatch::layers_of_stage(5, 5, s).size(), 1);
}

}  // namespace
