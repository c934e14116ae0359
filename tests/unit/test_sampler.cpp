// The sampler: greedy ties, a counter-based RNG, and sample statistics matching the distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "engine/sampler.h"

namespace {

using tpbatch::SamplingParams;

TEST(Sampler, GreedyPicksTheLowestIdAmongEqualMaxima) {
  std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(tpbatch::sample_token(logits.data(), 4, SamplingParams{}, 0, 0), 1);
}

TEST(Sampler, SampleZeroDrawsTheStreamRowsHadBeforeN) {
  // splitmix64 rounds of (seed, row, step) as before sampling.n existed: old results still reproduce.
  auto mix = [](uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  const uint64_t h = mix(mix(mix(5) ^ 9) ^ 4);
  EXPECT_EQ(tpbatch::counter_uniform(5, 9, 4, 0), static_cast<double>(h >> 11) * 0x1.0p-53);
}

TEST(Sampler, CounterUniformDependsOnlyOnSeedRowStep) {
  EXPECT_EQ(tpbatch::counter_uniform(1, 2, 3), tpbatch::counter_uniform(1, 2, 3));
  EXPECT_NE(tpbatch::counter_uniform(1, 2, 3), tpbatch::counter_uniform(1, 2, 4));
  EXPECT_NE(tpbatch::counter_uniform(1, 2, 3), tpbatch::counter_uniform(1, 3, 3));
  EXPECT_NE(tpbatch::counter_uniform(1, 2, 3), tpbatch::counter_uniform(2, 2, 3));
  EXPECT_NE(tpbatch::counter_uniform(1, 2, 3), tpbatch::counter_uniform(1, 2, 3, 1));
  EXPECT_NE(tpbatch::counter_uniform(1, 2, 3, 1), tpbatch::counter_uniform(1, 2, 3, 2));
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    const double u = tpbatch::counter_uniform(7, static_cast<uint64_t>(i), 0);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.01);
}

std::map<int, double> frequencies(const std::vector<float>& logits, const SamplingParams& p, int draws) {
  std::map<int, double> f;
  for (int i = 0; i < draws; ++i)
    f[tpbatch::sample_token(logits.data(), static_cast<int64_t>(logits.size()), p, static_cast<uint64_t>(i), 0)] += 1.0 / draws;
  return f;
}

TEST(Sampler, FrequenciesFollowTheSoftmaxAtTemperature) {
  std::vector<float> logits = {1.0f, 0.0f, -1.0f, 0.5f};
  SamplingParams p;
  p.temperature = 0.7;
  const auto f = frequencies(logits, p, 40000);
  double z = 0;
  for (float l : logits) z += std::exp(l / 0.7);
  for (int t = 0; t < 4; ++t) EXPECT_NEAR(f.count(t) ? f.at(t) : 0.0, std::exp(logits[t] / 0.7) / z, 0.01) << t;
}

TEST(Sampler, TopKKeepsOnlyTheKMostLikely) {
  std::vector<float> logits = {3.0f, 0.0f, 2.9f, 2.8f, -5.0f};
  SamplingParams p;
  p.temperature = 1.0;
  p.top_k = 2;
  const auto f = frequencies(logits, p, 5000);
  for (const auto& [t, _] : f) EXPECT_TRUE(t == 0 || t == 2) << t;
  EXPECT_NEAR(f.at(0), std::exp(3.0) / (std::exp(3.0) + std::exp(2.9)), 0.03);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.75;  // 0.5 + 0.3 reaches it: tokens 0 and 1 only
  const auto f = frequencies(logits, p, 5000);
  for (const auto& [t, _] : f) EXPECT_LE(t, 1) << t;
  EXPECT_NEAR(f.at(0), 0.5 / 0.8, 0.03);
}

}  // namespace
