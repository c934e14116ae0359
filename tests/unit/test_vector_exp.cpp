// The softmax's polynomial exp (backend/cpu/vector_exp.h): the scalar reference against exp in
// double within the stated bound over the softmax's domain [-100, 0]; 0 at and below the underflow
// edge, -inf included; and the AVX2 version equal to the scalar one bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cpu/attention/decode_attention_tile.h"
#include "backend/cpu/vector_exp.h"

namespace tpbatch::cpu {
namespace {

// Every float of [-100, 0] would be ~1e9 values; a dense even grid plus the awkward points.
std::vector<float> softmax_domain() {
  std::vector<float> xs;
  for (int64_t i = 0; i <= 2'000'000; ++i) xs.push_back(static_cast<float>(-100.0 * static_cast<double>(i) / 2e6));
  for (float x : {-0.0f, -1e-30f, -1e-7f, -0.34657359f, -0.34657360f, -0.6931472f, -87.0f, -87.33654f, -87.336f})
    xs.push_back(x);
  return xs;
}

TEST(VectorExp, ScalarReferenceIsWithinTheStatedRelativeErrorOfExp) {
  double worst = 0;
  float worst_x = 0;
  for (float x : softmax_domain()) {
    if (x < vexp::kExpLo) continue;  // the flush-to-zero range, checked below
    const double want = std::exp(static_cast<double>(x));
    const double err = std::fabs(vexp::exp_scalar(x) - want) / want;
    if (err > worst) worst = err, worst_x = x;
  }
  EXPECT_LE(worst, vexp::kExpMaxRelError) << "at x = " << worst_x;
  // Positive arguments up to the clamp (not used by the softmax, but stated).
  for (float x : {0.5f, 1.0f, 10.0f, 88.0f})
    EXPECT_LE(std::fabs(vexp::exp_scalar(x) - std::exp(double(x))) / std::exp(double(x)), vexp::kExpMaxRelError) << x;
  EXPECT_EQ(vexp::exp_scalar(0.0f), 1.0f);
}

TEST(VectorExp, BelowTheUnderflowEdgeAndMinusInfinityGiveZero) {
  for (float x : {-87.34f, -88.0f, -100.0f, -1e4f, -1e30f, -std::numeric_limits<float>::max(),
                  -std::numeric_limits<float>::infinity()}) {
    EXPECT_EQ(vexp::exp_scalar(x), 0.0f) << x;
    EXPECT_LE(std::exp(double(x)), 1.2e-38) << x;  // so the absolute error is under the smallest normal
  }
}

TEST(VectorExp, Avx2VersionEqualsTheScalarReferenceBitForBit) {
  if (!detail::decode_kernel_enabled()) GTEST_SKIP() << "this CPU has no AVX2 + FMA";
  std::vector<float> xs = softmax_domain();
  for (float x : {-87.34f, -88.0f, -1e30f, -std::numeric_limits<float>::infinity(), 3.0f, 88.0f, 1e9f})
    xs.push_back(x);
  // Odd length: the last few go through the scalar tail.
  std::vector<float> ys(xs.size(), std::nanf(""));
  detail::exp_avx2(xs.data(), ys.data(), static_cast<int64_t>(xs.size()));
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(ys[i], vexp::exp_scalar(xs[i])) << "x = " << xs[i];
}

}  // namespace
}  // namespace tpbatch::cpu
