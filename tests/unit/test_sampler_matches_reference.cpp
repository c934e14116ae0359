// sample_token returns the full-sort reference's token (sampler_reference.h) bit for bit: on random
// rows of many shapes and parameters, with every level of the fast path (sampler_fast.h) reached.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampler_fast.h"
#include "engine/sampler_reference.h"

namespace {

using tpbatch::SamplingParams;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits shaped like a language model's (a normal bulk, a few tokens far above it), flat ones,
// tied ones (few distinct values), and ones with masked (-inf) tokens and signed zeros.
std::vector<float> random_row(std::mt19937_64& rng, int64_t vocab) {
  std::vector<float> l(static_cast<size_t>(vocab));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int shape = static_cast<int>(rng() % 5);
  const float spread = std::array<float, 5>{0.05f, 0.5f, 2.0f, 4.0f, 12.0f}[rng() % 5];
  for (float& v : l) v = spread * normal(rng);
  if (shape == 1) {  // a peak: a few tokens 5-25 above the bulk
    for (int i = 0; i < 1 + static_cast<int>(rng() % 20); ++i)
      l[rng() % l.size()] += 5.0f + 20.0f * static_cast<float>(rng() % 1000) / 1000.0f;
  } else if (shape == 2) {  // ties: a handful of distinct values
    for (float& v : l) v = std::round(v / spread) * 0.5f;
  } else if (shape == 3) {  // masked tokens and both zeros
    for (float& v : l) {
      const uint64_t r = rng() % 8;
      v = r == 0 ? -kInf : r == 1 ? 0.0f : r == 2 ? -0.0f : v;
    }
  } else if (shape == 4) {  // far from zero: the subtraction of the maximum rounds
    const float offset = std::array<float, 3>{-3e4f, 1e3f, 5e5f}[rng() % 3];
    for (float& v : l) v += offset;
  }
  return l;
}

SamplingParams random_params(std::mt19937_64& rng, int64_t vocab) {
  SamplingParams p;
  p.seed = rng();
  p.temperature = std::array<double, 7>{0.01, 0.3, 0.7, 0.8, 1.0, 2.0, 10.0}[rng() % 7];
  const int64_t ks[] = {0, 0, 0, 1, 2, 50, 1000, vocab - 1, vocab, vocab + 3};
  p.top_k = std::max<int64_t>(ks[rng() % 10], 0);
  p.top_p = std::array<double, 7>{1.0, 1.0, 0.5, 0.9, 0.95, 0.999, 1.0 - 1e-12}[rng() % 7];
  p.min_p = std::array<double, 6>{0.0, 0.0, 0.0, 1e-20, 0.01, 0.3}[rng() % 6];
  return p;
}

// Draws every (row, step) of `draws` on one logit row with both samplers; the number that differ.
int mismatches(const std::vector<float>& l, const SamplingParams& p, int draws, uint64_t row0) {
  int bad = 0;
  const int64_t v = static_cast<int64_t>(l.size());
  for (int d = 0; d < draws; ++d) {
    const uint64_t row = row0 + static_cast<uint64_t>(d), step = 7, sample = static_cast<uint64_t>(d % 3);
    const int32_t want = tpbatch::sample_token_reference(l.data(), v, p, row, step, sample);
    const int32_t got = tpbatch::sample_token(l.data(), v, p, row, step, sample);
    if (got != want) {
      ++bad;
      ADD_FAILURE() << "vocab " << v << " T " << p.temperature << " top_k " << p.top_k << " top_p " << p.top_p
                    << " min_p " << p.min_p << " row " << row << ": " << got << " vs the reference's " << want;
    }
  }
  return bad;
}

TEST(SamplerMatchesReference, RandomRowsOfEveryShapeDrawTheReferencesToken) {
  std::mt19937_64 rng(20240611);
  const tpbatch::FastSamplerCounts before = tpbatch::fast_sampler_counts();
  for (int64_t vocab : {1, 2, 3, 7, 64, 1000, 5000, 30000}) {
    const int rows = vocab <= 1000 ? 300 : vocab <= 5000 ? 100 : 30;
    for (int r = 0; r < rows; ++r) {
      const std::vector<float> l = random_row(rng, vocab);
      ASSERT_EQ(mismatches(l, random_params(rng, vocab), 20, rng() % 1000000), 0);
    }
  }
  // The deeper levels decide only what the shallower ones could not: every one must have been used.
  const tpbatch::FastSamplerCounts& after = tpbatch::fast_sampler_counts();
  for (int k = 0; k < 4; ++k) EXPECT_GT(after.level[k], before.level[k]) << "level " << k << " never decided";
}

TEST(SamplerMatchesReference, LanguageModelSizedRowsDrawTheReferencesToken) {
  // 128,256 tokens (Llama 3's vocabulary) with a language model's spread, at the usual settings.
  std::mt19937_64 rng(77);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> l(128256);
  for (float& v : l) v = normal(rng);
  for (int i = 0; i < 8; ++i) l[rng() % l.size()] += 14.0f;
  SamplingParams p;
  p.temperature = 0.8;
  EXPECT_EQ(mismatches(l, p, 25, 0), 0);
  p.top_p = 0.9;
  p.top_k = 50;
  EXPECT_EQ(mismatches(l, p, 10, 100), 0);
  p.top_k = 0;
  p.top_p = 0.999;
  EXPECT_EQ(mismatches(l, p, 10, 200), 0);
}

TEST(SamplerMatchesReference, TokensBeyondTheExactLevelCannotMoveTheDraw) {
  // One token at 0 and the rest ~37 nats down, where each p is under 2^-53: whatever their number
  // the sums stay 1 and the draw is token 3 (the reference's, computed over all of them).
  std::vector<float> l(100000, -37.01f);
  l[3] = 0.0f;
  SamplingParams p;
  p.temperature = 1.0;
  EXPECT_EQ(mismatches(l, p, 50, 0), 0);
  EXPECT_EQ(tpbatch::sample_token(l.data(), 100000, p, 1, 1), 3);
}

TEST(SamplerMatchesReference, AGivenRowMaximumIsCheckedNotTrusted) {
  // The LM head's maximum saves a pass; a wrong one (above or below the real one) changes nothing.
  std::mt19937_64 rng(31);
  for (int r = 0; r < 40; ++r) {
    const std::vector<float> l = random_row(rng, 3000);
    const SamplingParams p = random_params(rng, 3000);
    const float mx = *std::max_element(l.begin(), l.end());
    const int32_t want = tpbatch::sample_token_reference(l.data(), 3000, p, 5, 6, 0);
    for (float given : {mx, mx + 1.0f, mx - 0.5f, -kInf, kInf})
      EXPECT_EQ(tpbatch::sample_token(l.data(), 3000, p, 5, 6, 0, given), want) << "row " << r << " given " << given;
  }
}

TEST(SamplerMatchesReference, RowsWithNanOrNoFiniteMaximumTakeTheReference) {
  const int64_t before = tpbatch::fast_sampler_counts().reference;
  SamplingParams p;
  p.temperature = 1.0;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> rows = {
      {0.5f, nan, 1.0f, -2.0f}, {-kInf, -kInf, -kInf}, {1.0f, kInf, 0.0f, kInf}, {nan, nan}};
  for (const auto& l : rows) EXPECT_EQ(mismatches(l, p, 5, 0), 0);
  EXPECT_EQ(tpbatch::fast_sampler_counts().reference - before, static_cast<int64_t>(5 * rows.size()));
}

}  // namespace
