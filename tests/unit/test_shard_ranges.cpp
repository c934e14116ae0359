// Megatron shard arithmetic: the slices of heads, widths and layers each rank keeps.
#include <gtest/gtest.h>

#include "model/shard_ranges.h"

namespace {

using tpbatch::ModelConfig;

ModelConfig heads(int64_t q, int64_t kv) {
  ModelConfig c;
  c.num_heads = q;
  c.num_kv_heads = kv;
  return c;
}

TEST(ShardRanges, BalancedSplitCoversEveryIndexOnce) {
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

TEST(ShardRanges, KvHeadsAreReplicatedWhenTensorExceedsThem) {
  const auto c = heads(8, 2);
  EXPECT_EQ(tpbatch::kv_heads_of_rank(c, 2, 1).begin, 1);  // TP 2: one head each
  for (int r = 0; r < 8; ++r) {                            // TP 8: each head on 4 ranks
    const auto s = tpbatch::kv_heads_of_rank(c, 8, r);
    EXPECT_EQ(s.size(), 1);
    EXPECT_EQ(s.begin, r / 4);
  }
}

TEST(ShardRanges, StagesTakeContiguousLayersEarlierOnesTheExtra) {
  EXPECT_EQ(tpbatch::layers_of_stage(5, 2, 0).size(), 3);
  EXPECT_EQ(tpbatch::layers_of_stage(5, 2, 1).begin, 3);
  EXPECT_EQ(tpbatch::layers_of_stage(5, 2, 1).end, 5);
  for (int s = 0; s < 5; ++s) EXPECT_EQ(tpbatch::layers_of_stage(5, 5, s).size(), 1);
}

}  // namespace
