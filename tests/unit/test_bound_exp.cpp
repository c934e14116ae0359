// The sampler's float 2^x for bounds (engine/bound_exp.h): within its stated relative error over
// [floor, 0], the vector version equal to the scalar one lane for lane, 0 below the floor (and for
// -inf and NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "engine/bound_exp.h"

namespace {

using tpbatch::bound_exp2;
using tpbatch::kBoundExp2Floor;
using f32x4 = float __attribute__((vector_size(16)));

TEST(BoundExp2, WithinTheStatedRelativeErrorOverItsRangeInEveryLane) {
  double worst = 0;
  float worst_x = 0;
  int64_t lanes_differ = 0;
  const int64_t points = 20'000'000;  // every float of [-115, 0] would be ~1e9
  for (int64_t i = 0; i < points; i += 4) {
    f32x4 x;
    for (int j = 0; j < 4; ++j) x[j] = static_cast<float>(kBoundExp2Floor * static_cast<double>(i + j) / points);
    const f32x4 v = bound_exp2(x);
    for (int j = 0; j < 4; ++j) {
      const float s = bound_exp2(static_cast<float>(x[j]));
      lanes_differ += std::memcmp(&s, &v[j], sizeof s) != 0;
      const double want = std::exp2(static_cast<double>(x[j]));
      const double err = std::fabs(s - want) / want;
      if (err > worst) worst = err, worst_x = x[j];
    }
  }
  for (float x : {-0.0f, -1e-30f, -0.5f, -0.50000006f, -1.5f, -114.99999f, kBoundExp2Floor}) {
    const double want = std::exp2(static_cast<double>(x));
    worst = std::max(worst, std::fabs(bound_exp2(x) - want) / want);
  }
  EXPECT_LE(worst, tpbatch::kBoundExp2RelError) << "at x = " << worst_x;
  EXPECT_EQ(lanes_differ, 0);
}

TEST(BoundExp2, ZeroBelowTheFloorAndForMinusInfinityAndNan) {
  EXPECT_GT(bound_exp2(kBoundExp2Floor), 0.0f);
  EXPECT_EQ(bound_exp2(std::nextafter(kBoundExp2Floor, -1e9f)), 0.0f);
  EXPECT_EQ(bound_exp2(-1e30f), 0.0f);
  EXPECT_EQ(bound_exp2(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(bound_exp2(std::numeric_limits<float>::quiet_NaN()), 0.0f);
  const f32x4 v = bound_exp2(f32x4{-std::numeric_limits<float>::infinity(),
                                                    std::numeric_limits<float>::quiet_NaN(), -200.0f, 0.0f});
  EXPECT_EQ(v[0], 0.0f);
  EXPECT_EQ(v[1], 0.0f);
  EXPECT_EQ(v[2], 0.0f);
  EXPECT_GT(v[3], 0.99f);
}

}  // namespace
