// silu_mul and sum_exp_shifted (backend/cpu/cpu_exp_ops.h) against double-precision references, on
// the AVX2 path and the portable one.
#include "backend/cpu/cpu_exp_ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

using tpbatch::cpu::exp_ops_vectorised;
using tpbatch::cpu::set_exp_ops_vectorised_for_testing;
using tpbatch::cpu::silu_mul;
using tpbatch::cpu::sum_exp_shifted;

// Runs the test body once per path the CPU has, then restores the detected path.
class ExpOpsPathTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    detected_ = exp_ops_vectorised();
    set_exp_ops_vectorised_for_testing(GetParam());
    if (GetParam() && !exp_ops_vectorised()) GTEST_SKIP() << "CPU lacks AVX2/FMA";
  }
  void TearDown() override { set_exp_ops_vectorised_for_testing(detected_); }
  bool detected_ = false;
};

std::vector<float> uniform(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST_P(ExpOpsPathTest, SiluMulMatchesDoubleReference) {
  const int64_t m = 3, inter = 37;  // 37: four vectors and a tail of 5
  auto gu = uniform(size_t(m * 2 * inter), -30.0f, 30.0f, 1);
  const float special[] = {0.0f, -100.0f, 100.0f, 88.5f, -88.5f, 1e-20f, -1e-20f};
  for (size_t i = 0; i < std::size(special); ++i) gu[i] = special[i], gu[40 + i] = special[i];  // vector and tail
  std::vector<float> out(size_t(m * inter));
  silu_mul(gu.data(), out.data(), m, inter);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gu[r * 2 * inter + i], u = gu[r * 2 * inter + inter + i];
      const double want = g / (1.0 + std::exp(-g)) * u;
      EXPECT_NEAR(out[r * inter + i], want, 4e-7 * std::abs(want) + 1e-30) << "row " << r << " i " << i << " g " << g;
    }
}

TEST_P(ExpOpsPathTest, SiluMulOfManyRowsEqualsRowByRow) {  // the threaded split changes nothing
  const int64_t m = 40, inter = 1000;
  const auto gu = uniform(size_t(m * 2 * inter), -8.0f, 8.0f, 2);
  std::vector<float> all(size_t(m * inter)), one(static_cast<size_t>(inter));
  silu_mul(gu.data(), all.data(), m, inter);
  for (int64_t r = 0; r < m; ++r) {
    silu_mul(gu.data() + r * 2 * inter, one.data(), 1, inter);
    for (int64_t i = 0; i < inter; ++i) ASSERT_EQ(all[r * inter + i], one[i]) << "row " << r;
  }
}

TEST_P(ExpOpsPathTest, SumExpShiftedMatchesDoubleReference) {
  for (int64_t n : {1, 7, 8, 9, 17, 32000}) {
    auto x = uniform(size_t(n), -50.0f, 10.0f, unsigned(n));
    float mx = -std::numeric_limits<float>::infinity();
    for (float v : x) mx = std::max(mx, v);
    double want = 0.0;
    for (float v : x) want += std::exp(double(v) - mx);
    EXPECT_NEAR(sum_exp_shifted(x.data(), n, mx), want, 1e-6 * want) << "n " << n;
  }
}

TEST_P(ExpOpsPathTest, SumExpShiftedIsNanWhenAnyValueIsNan) {
  for (int64_t at : {0, 5, 15, 16}) {  // in a vector or in the tail of 17
    std::vector<float> x(17, 1.0f);
    x[size_t(at)] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_TRUE(std::isnan(sum_exp_shifted(x.data(), 17, 1.0f))) << "NaN at " << at;
  }
}

TEST_P(ExpOpsPathTest, SumExpShiftedCountsMinusInfinityAsZero) {
  std::vector<float> x(19, -std::numeric_limits<float>::infinity());
  x[3] = 2.0f, x[18] = 0.0f;
  EXPECT_NEAR(sum_exp_shifted(x.data(), 19, 2.0f), 1.0 + std::exp(-2.0), 1e-7);
}

INSTANTIATE_TEST_SUITE_P(Path, ExpOpsPathTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Avx2Fma" : "Portable"; });

}  // namespace
