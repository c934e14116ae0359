// Rank layout arithmetic: coordinates and which layouts a model allows.
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

}  // namespace
