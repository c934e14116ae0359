// 4-bit weights with scales and zero points: gemm_nt_int4 against gemm_nt on the same weights
// dequantized ahead ((value - zero) * scale in fp32, a reference written here from the layout
// alone): equal to the last bit on every path and kernel family this CPU runs, for whole-row,
// 128- and 32-column groups, column slices that start inside a group, and odd k (a row's last
// byte half used); except one row of x on AVX2 with groups on 16-column boundaries, whose kernel
// applies each scale and zero point once per group: there, within fp32 accumulation noise.
// (AVX-512's one-row kernel looks each weight up dequantized and stays exact.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "backend/cpu/gemm/gemm.h"

namespace tpbatch::cpu {
namespace {

struct Int4Weights {
  std::vector<uint8_t> packed;  // [n][(k + 1) / 2], low nibble first
  std::vector<float> scales, zeros, dequantized;
  GemmScales grid;
};

Int4Weights make_int4(int64_t n, int64_t k, int64_t group, int64_t phase, std::mt19937& rng) {
  Int4Weights w;
  const int64_t groups = (phase + k + group - 1) / group, rb = (k + 1) / 2;
  std::uniform_int_distribution<int> code(0, 15);
  std::uniform_real_distribution<float> scale(1e-3f, 2e-2f);
  std::vector<int> codes(size_t(n * k));
  for (int& c : codes) c = code(rng);
  for (int64_t i = 0; i < n * groups; ++i) {
    w.scales.push_back(scale(rng));
    w.zeros.push_back(float(code(rng) + (i % 7 == 0 ? 1 : 0)));  // gptq's zero + 1 reaches 16
  }
  w.packed.assign(size_t(n * rb), 0);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const int v = codes[size_t(r * k + c)];
      w.packed[size_t(r * rb + c / 2)] |= uint8_t(v << (4 * (c % 2)));
      const size_t i = size_t(r * groups + (c + phase) / group);
      w.dequantized.push_back((float(v) - w.zeros[i]) * w.scales[i]);
    }
  w.grid = GemmScales{w.scales.data(), groups, group, phase, w.zeros.data()};
  return w;
}

// Whether gemm_nt_int4 runs the per-group-scale kernel (gemm_quant_m1_avx2.cpp).
bool scales_per_group(GemmIsa isa, GemmPath path, int64_t m, int64_t group, int64_t phase) {
  return isa == GemmIsa::Avx2Fma && m == 1 && (path == GemmPath::Auto || path == GemmPath::RowBlocked) &&
         group % 16 == 0 && phase % 16 == 0;
}

TEST(GemmInt4, EqualsTheDequantizedWeightsOnEveryPathAndIsa) {
  std::mt19937 rng(11);
  const GemmIsa top = gemm_isa();
  for (int isa = 0; isa <= int(top); ++isa) {
    set_gemm_isa_for_testing(GemmIsa(isa));
    for (int64_t k : {256, 301}) {
      for (auto [group, phase] : {std::pair<int64_t, int64_t>{128, 0}, {128, 64}, {128, 50}, {32, 0}, {32, 16},
                                  {int64_t(k), 0}}) {
        const int64_t n = 37;
        const Int4Weights w = make_int4(n, k, group, phase, rng);
        for (int64_t m : {1, 5, 17, 130}) {
          std::vector<float> x(size_t(m * k));
          std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
          for (float& v : x) v = dist(rng);
          for (GemmPath path : {GemmPath::Auto, GemmPath::RowBlocked, GemmPath::Broadcast, GemmPath::Panel}) {
            if (scales_per_group(GemmIsa(isa), path, m, group, phase)) continue;
            std::vector<float> want(size_t(m * n)), got(size_t(m * n));
            gemm_nt(x.data(), k, w.dequantized.data(), k, DType::F32, want.data(), n, m, n, k, path);
            gemm_nt_int4(x.data(), w.packed.data(), w.grid, got.data(), m, n, k, path);
            for (size_t i = 0; i < got.size(); ++i)
              ASSERT_EQ(got[i], want[i]) << gemm_isa_name(GemmIsa(isa)) << " " << gemm_path_name(path) << " m=" << m
                                         << " k=" << k << " group=" << group << " phase=" << phase << " at " << i;
          }
        }
      }
    }
  }
  reset_gemm_isa_for_testing();
}

// A prefill's panel path widens 384 rows at a time at k = 256: 600 rows are two panels, the last
// partial. One sgemm over all 600 dequantized rows may block them differently from two calls (the
// last bits of a few results move), so the check is fp32 noise: 1e-6 of sum |w x|.
TEST(GemmInt4, PanelsOfSeveralSlicesAreTheDequantizedWeightsToFp32Noise) {
  std::mt19937 rng(13);
  const int64_t n = 600, k = 256, m = 33;
  const Int4Weights w = make_int4(n, k, 128, 0, rng);
  std::vector<float> x(size_t(m * k)), want(size_t(m * n)), got(size_t(m * n));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(rng);
  gemm_nt(x.data(), k, w.dequantized.data(), k, DType::F32, want.data(), n, m, n, k, GemmPath::Panel);
  gemm_nt_int4(x.data(), w.packed.data(), w.grid, got.data(), m, n, k, GemmPath::Panel);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < n; ++r) {
      double magnitude = 0;
      for (int64_t c = 0; c < k; ++c)
        magnitude += std::fabs(double(w.dequantized[size_t(r * k + c)]) * x[size_t(i * k + c)]);
      ASSERT_NEAR(got[size_t(i * n + r)], want[size_t(i * n + r)], 1e-6 * magnitude) << "row " << i << " column " << r;
    }
}

// One row of x: within 2e-6 of sum (|q| + |zero|) * scale * |x| (the differences seen are below
// 2e-7 of it; one weight wrong by a code moves the result by about 1/k of it).
TEST(GemmInt4, OneRowOfXIsTheDequantizedWeightsToFp32Noise) {
  std::mt19937 rng(12);
  const GemmIsa top = gemm_isa();
  for (int isa = 0; isa <= int(top); ++isa) {
    set_gemm_isa_for_testing(GemmIsa(isa));
    for (int64_t k : {256, 301, 768}) {
      for (auto [group, phase] : {std::pair<int64_t, int64_t>{128, 0}, {128, 64}, {128, 50}, {32, 0}, {32, 16},
                                  {int64_t(k), 0}}) {
        const int64_t n = 37, groups = (phase + k + group - 1) / group;
        const Int4Weights w = make_int4(n, k, group, phase, rng);
        std::vector<float> x(static_cast<size_t>(k));
        std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
        for (float& v : x) v = dist(rng);
        for (GemmPath path : {GemmPath::Auto, GemmPath::RowBlocked}) {
          std::vector<float> want(static_cast<size_t>(n)), got(static_cast<size_t>(n));
          gemm_nt(x.data(), k, w.dequantized.data(), k, DType::F32, want.data(), n, 1, n, k, path);
          gemm_nt_int4(x.data(), w.packed.data(), w.grid, got.data(), 1, n, k, path);
          for (int64_t r = 0; r < n; ++r) {
            double magnitude = 0;
            for (int64_t c = 0; c < k; ++c) {
              const size_t i = size_t(r * groups + (c + phase) / group);
              const int q = (w.packed[size_t(r * ((k + 1) / 2) + c / 2)] >> (4 * (c % 2))) & 0xf;
              magnitude += (q + std::fabs(double(w.zeros[i]))) * w.scales[i] * std::fabs(double(x[size_t(c)]));
            }
            ASSERT_NEAR(got[size_t(r)], want[size_t(r)], 2e-6 * magnitude)
                << gemm_isa_name(GemmIsa(isa)) << " " << gemm_path_name(path) << " k=" << k << " group=" << group
                << " phase=" << phase << " row " << r;
          }
        }
      }
    }
  }
  reset_gemm_isa_for_testing();
}

TEST(GemmInt4, ZerosAreRequiredAndGroupsMustCoverTheRow) {
  std::vector<float> x(8), y(2), scales(4, 1.0f), zeros(4, 8.0f);
  std::vector<uint8_t> w(8);
  EXPECT_THROW(gemm_nt_int4(x.data(), w.data(), GemmScales{scales.data(), 1, 8, 0, nullptr}, y.data(), 1, 2, 8),
               std::invalid_argument);
  EXPECT_THROW(gemm_nt_int4(x.data(), w.data(), GemmScales{scales.data(), 1, 4, 0, zeros.data()}, y.data(), 1, 2, 8),
               std::invalid_argument);
}

}  // namespace
}  // namespace tpbatch::cpu
