// fp8 (e4m3) weights with scales: the conversions of dtype.h, and gemm_nt_scaled against gemm_nt
// on the same weights dequantized ahead (value * scale in fp32): equal to the last bit on every
// path and kernel family this CPU runs, for block, per-channel and column-sliced scale groups,
// except one row of x on AVX2 with groups on 16-column boundaries, whose kernel applies each scale
// once per group: there, within fp32 accumulation noise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/gemm/gemm.h"
#include "backend/dtype.h"

namespace tpbatch::cpu {
namespace {

TEST(Fp8E4m3, EveryCodeRoundTripsThroughFloat) {
  for (int b = 0; b < 256; ++b) {
    const float f = f8e4m3_to_f32(uint8_t(b));
    if ((b & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(f)) << b;
      continue;
    }
    EXPECT_EQ(f32_to_f8e4m3(f), uint8_t(b)) << "code " << b << " = " << f;
  }
}

TEST(Fp8E4m3, KnownValues) {
  EXPECT_EQ(f8e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0xfe), -448.0f);
  EXPECT_EQ(f8e4m3_to_f32(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(f8e4m3_to_f32(0x08), std::ldexp(1.0f, -6));  // smallest normal
}

TEST(Fp8E4m3, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(f32_to_f8e4m3(1.0f + 1.0f / 16), 0x38);      // halfway 1 and 1.125: even (1)
  EXPECT_EQ(f32_to_f8e4m3(1.0f + 3.0f / 16), 0x3a);      // halfway 1.125 and 1.25: even (1.25)
  EXPECT_EQ(f32_to_f8e4m3(1.0f + 1.0f / 15), 0x39);      // above halfway: up
  EXPECT_EQ(f32_to_f8e4m3(1000.0f), 0x7e);               // saturates at 448
  EXPECT_EQ(f32_to_f8e4m3(-1.0e9f), 0xfe);
  EXPECT_EQ(f32_to_f8e4m3(std::ldexp(1.0f, -11)), 0x00);  // a quarter of the smallest subnormal
}

struct Case {
  int64_t group, phase;  // scale groups of the (sliced) columns
};

// Random fp8 values and scales for n rows of k columns, and the same weights dequantized.
struct ScaledWeights {
  std::vector<uint8_t> values;
  std::vector<float> scales, dequantized;
  GemmScales grid;
};

ScaledWeights make_scaled(int64_t n, int64_t k, Case c, std::mt19937& rng) {
  ScaledWeights w;
  const int64_t groups = (c.phase + k + c.group - 1) / c.group;
  w.grid = GemmScales{nullptr, groups, c.group, c.phase};
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  for (int64_t i = 0; i < n * k; ++i) {
    int b = code(rng);
    if ((b & 0x7f) == 0x7f) b = 0x30;  // no NaN codes
    w.values.push_back(uint8_t(b));
  }
  for (int64_t i = 0; i < n * groups; ++i) w.scales.push_back(scale(rng));
  w.grid.scales = w.scales.data();
  for (int64_t r = 0; r < n; ++r)
    for (int64_t col = 0; col < k; ++col)
      w.dequantized.push_back(f8e4m3_to_f32(w.values[size_t(r * k + col)]) *
                              w.scales[size_t(r * groups + (col + c.phase) / c.group)]);
  return w;
}

const Case kCases[] = {{128, 0}, {128, 50}, {128, 64}, {8, 0}, {300, 0}, {304, 0}, {1000, 700}};

// Whether gemm_nt_scaled runs the per-group-scale kernel (gemm_quant_m1_avx2.cpp).
bool scales_per_group(GemmIsa isa, GemmPath path, int64_t m, Case c) {
  return isa >= GemmIsa::Avx2Fma && m == 1 && (path == GemmPath::Auto || path == GemmPath::RowBlocked) &&
         c.group % 16 == 0 && c.phase % 16 == 0;
}

TEST(GemmScaled, EqualsTheDequantizedWeightsOnEveryPathAndIsa) {
  std::mt19937 rng(5);
  const int64_t n = 37, k = 300;
  const GemmIsa top = gemm_isa();
  for (int isa = 0; isa <= int(top); ++isa) {
    set_gemm_isa_for_testing(GemmIsa(isa));
    for (Case c : kCases) {
      const ScaledWeights w = make_scaled(n, k, c, rng);
      for (int64_t m : {1, 5, 17, 130}) {
        std::vector<float> x(size_t(m * k));
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (float& v : x) v = dist(rng);
        for (GemmPath path : {GemmPath::Auto, GemmPath::RowBlocked, GemmPath::Broadcast, GemmPath::Panel}) {
          if (scales_per_group(GemmIsa(isa), path, m, c)) continue;
          std::vector<float> want(size_t(m * n)), got(size_t(m * n));
          gemm_nt(x.data(), k, w.dequantized.data(), k, DType::F32, want.data(), n, m, n, k, path);
          gemm_nt_scaled(x.data(), w.values.data(), w.grid, got.data(), m, n, k, path);
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_EQ(got[i], want[i]) << gemm_isa_name(GemmIsa(isa)) << " " << gemm_path_name(path) << " m=" << m
                                       << " group=" << c.group << " phase=" << c.phase << " at " << i;
        }
      }
    }
  }
  reset_gemm_isa_for_testing();
}

// One row of x: within 2e-6 of sum |w x| (the differences seen are below 2e-7 of it; one weight
// wrong by a code moves the result by about 1/k of it), subnormal and extreme codes included
// (make_scaled draws every code but NaN's).
TEST(GemmScaled, OneRowOfXIsTheDequantizedWeightsToFp32Noise) {
  std::mt19937 rng(6);
  const GemmIsa top = gemm_isa();
  for (int isa = 0; isa <= int(top); ++isa) {
    set_gemm_isa_for_testing(GemmIsa(isa));
    for (int64_t k : {300, 768}) {
      for (Case c : kCases) {
        const int64_t n = 37;
        const ScaledWeights w = make_scaled(n, k, c, rng);
        std::vector<float> x(static_cast<size_t>(k));
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (float& v : x) v = dist(rng);
        for (GemmPath path : {GemmPath::Auto, GemmPath::RowBlocked}) {
          std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
          gemm_nt(x.data(), k, w.dequantized.data(), k, DType::F32, want.data(), n, 1, n, k, path);
          gemm_nt_scaled(x.data(), w.values.data(), w.grid, got.data(), 1, n, k, path);
          for (int64_t r = 0; r < n; ++r) {
            double magnitude = 0;
            for (int64_t col = 0; col < k; ++col) magnitude += std::fabs(double(w.dequantized[size_t(r * k + col)]) * x[size_t(col)]);
            ASSERT_NEAR(got[size_t(r)], want[size_t(r)], 2e-6 * magnitude)
                << gemm_isa_name(GemmIsa(isa)) << " " << gemm_path_name(path) << " k=" << k << " group=" << c.group
                << " phase=" << c.phase << " row " << r;
          }
        }
      }
    }
  }
  reset_gemm_isa_for_testing();
}

// Activations beyond 2^60 would overflow the kernel's staged copy of x (x * 2^64): such a row
// takes the dequantizing path, whose result is exact.
TEST(GemmScaled, HugeActivationsTakeTheExactPath) {
  std::mt19937 rng(7);
  const int64_t n = 9, k = 256;
  const ScaledWeights w = make_scaled(n, k, Case{128, 0}, rng);
  std::vector<float> x(static_cast<size_t>(k), 0.5f);
  x[3] = 0x1.0p70f;
  std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
  gemm_nt(x.data(), k, w.dequantized.data(), k, DType::F32, want.data(), n, 1, n, k, GemmPath::RowBlocked);
  gemm_nt_scaled(x.data(), w.values.data(), w.grid, got.data(), 1, n, k, GemmPath::RowBlocked);
  for (int64_t r = 0; r < n; ++r) {
    ASSERT_TRUE(std::isfinite(got[size_t(r)])) << r;
    ASSERT_EQ(got[size_t(r)], want[size_t(r)]) << r;
  }
}

TEST(GemmScaled, ScaleGroupsThatDoNotCoverTheRowAreRefused) {
  std::vector<float> x(8), y(2), scales(2, 1.0f);
  std::vector<uint8_t> w(16);
  EXPECT_THROW(gemm_nt_scaled(x.data(), w.data(), GemmScales{scales.data(), 1, 4, 0}, y.data(), 1, 2, 8),
               std::invalid_argument);
}

}  // namespace
}  // namespace tpbatch::cpu
