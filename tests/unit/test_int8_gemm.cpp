// W8A8 (int8 weights, x quantized to int8 per row): gemm_nt_int8 against a plain reference that
// quantizes x by the same rule (gemm.h) and sums in int64 -- equal to the last bit on each kernel
// (portable, AVX2 and AVX512-VNNI where the CPU has them): integer sums do not depend on their order --
// and against the fp32 GEMM on the dequantized weights within the bound the activation rounding
// allows (derived at ActivationRoundingStaysWithinItsBound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "backend/cpu/gemm/gemm.h"
#include "backend/dtype.h"

namespace tpbatch::cpu {
namespace {

struct Int8Weights {
  std::vector<int8_t> values;
  std::vector<float> scales, dequantized;
};

// Values over the whole int8 range (-128 included: the VNNI kernel's offset must hold there).
Int8Weights make_weights(int64_t n, int64_t k, std::mt19937& rng) {
  std::uniform_int_distribution<int> v(-128, 127);
  std::uniform_real_distribution<float> s(0.001f, 0.02f);
  Int8Weights w;
  w.values.resize(size_t(n * k));
  w.scales.resize(size_t(n));
  w.dequantized.resize(size_t(n * k));
  for (auto& x : w.values) x = int8_t(v(rng));
  for (auto& x : w.scales) x = s(rng);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t c = 0; c < k; ++c) w.dequantized[size_t(j * k + c)] = float(w.values[size_t(j * k + c)]) * w.scales[size_t(j)];
  return w;
}

std::vector<float> make_x(int64_t m, int64_t k, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> x(size_t(m * k));
  for (auto& v : x) v = d(rng);
  if (m > 1 && k > 3) x[size_t(k + 3)] = 40.0f;  // an outlier: row 1's scale is set by it
  return x;
}

// The reference: per row, s = max|x| / 127, q = round-half-even(x / s) in [-127, 127], an int64
// sum of q * w, then float(sum) * s * scale.
std::vector<float> reference(const std::vector<float>& x, const Int8Weights& w, int64_t m, int64_t n, int64_t k) {
  std::vector<float> y(size_t(m * n));
  for (int64_t i = 0; i < m; ++i) {
    float amax = 0.0f;
    for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(x[size_t(i * k + c)]));
    const float s = amax / 127.0f;
    std::vector<int64_t> q(size_t(k), 0);
    if (amax > 0.0f)
      for (int64_t c = 0; c < k; ++c) q[size_t(c)] = std::clamp<int64_t>(int64_t(std::rint(x[size_t(i * k + c)] / s)), -127, 127);
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t c = 0; c < k; ++c) acc += q[size_t(c)] * int64_t(w.values[size_t(j * k + c)]);
      y[size_t(i * n + j)] = float(acc) * s * w.scales[size_t(j)];
    }
  }
  return y;
}

struct Shape {
  int64_t m, n, k;
};
const Shape kShapes[] = {{1, 1, 1}, {1, 37, 63}, {1, 40, 64}, {1, 41, 65}, {3, 17, 200}, {17, 33, 768}, {5, 64, 1031},
                         {6, 20, 130}, {32, 12, 768}};

void expect_reference_on_each_shape() {
  std::mt19937 rng(11);
  for (const Shape& s : kShapes) {
    const Int8Weights w = make_weights(s.n, s.k, rng);
    const std::vector<float> x = make_x(s.m, s.k, rng);
    std::vector<float> y(size_t(s.m * s.n), -1.0f);
    gemm_nt_int8(x.data(), w.values.data(), w.scales.data(), y.data(), s.m, s.n, s.k);
    const std::vector<float> want = reference(x, w, s.m, s.n, s.k);
    for (size_t e = 0; e < y.size(); ++e)
      ASSERT_EQ(y[e], want[e]) << "m=" << s.m << " n=" << s.n << " k=" << s.k << " element " << e;
  }
  // The largest products at the largest depth: q = -127 against w = -128 (and 127 against 127)
  // everywhere, so every pair of products is 32512 (the AVX2 kernel's int16 lanes' limit is 32767)
  // and the total, 131072 * 16256, is just inside int32.
  for (const int64_t m : {1, 2}) {
    const int64_t n = 5, k = 131072;
    Int8Weights w;
    w.values.resize(size_t(n * k));
    w.scales.assign(size_t(n), 0.5f);
    std::vector<float> x(size_t(m * k));
    for (int64_t c = 0; c < k; ++c) {
      const bool negative = (c / 3) % 2 == 0;
      for (int64_t i = 0; i < m; ++i) x[size_t(i * k + c)] = negative ? -2.0f : 2.0f;
      for (int64_t j = 0; j < n; ++j) w.values[size_t(j * k + c)] = negative ? int8_t(-128) : int8_t(127);
    }
    std::vector<float> y(size_t(m * n), -1.0f);
    gemm_nt_int8(x.data(), w.values.data(), w.scales.data(), y.data(), m, n, k);
    const std::vector<float> want = reference(x, w, m, n, k);
    for (size_t e = 0; e < y.size(); ++e) ASSERT_EQ(y[e], want[e]) << "extreme products, m=" << m << " element " << e;
  }
}

TEST(Int8Gemm, PortableKernelEqualsTheReferenceExactly) {
  set_gemm_isa_for_testing(GemmIsa::Portable);
  EXPECT_STREQ(gemm_int8_kernel(), "portable");
  expect_reference_on_each_shape();
  reset_gemm_isa_for_testing();
}

// Also on CPUs with VNNI: forcing the AVX2 ISA takes this kernel there.
TEST(Int8Gemm, Avx2KernelEqualsTheReferenceExactly) {
  reset_gemm_isa_for_testing();
  if (gemm_isa() < GemmIsa::Avx2Fma) GTEST_SKIP() << "this CPU has no AVX2";
  set_gemm_isa_for_testing(GemmIsa::Avx2Fma);
  EXPECT_STREQ(gemm_int8_kernel(), "avx2");
  expect_reference_on_each_shape();
  reset_gemm_isa_for_testing();
}

TEST(Int8Gemm, VnniKernelEqualsTheReferenceExactly) {
  reset_gemm_isa_for_testing();
  if (std::string(gemm_int8_kernel()) != "avx512-vnni") GTEST_SKIP() << "this CPU has no AVX512-VNNI";
  expect_reference_on_each_shape();
}

// x[c] = s q[c] + e[c] with |e[c]| <= s / 2 (round to nearest; s = amax / 127, so |x / s| <= 127
// and the clamp only absorbs the division's last-bit rounding), hence against the exact product
// with the dequantized weights |y_int8 - x.w| <= (s / 2) sum_c |w[c]| = amax / 254 * sum_c |w[c]|.
// Both sides also round in fp32: the fp32 GEMM's sum of k products by at most about k eps
// sum_c |x[c] w[c]| (eps = 2^-24), the int8 path's three float steps by 3 eps |y|; the bound
// takes twice each. The observed error must also be nonzero: the activations really are rounded.
TEST(Int8Gemm, ActivationRoundingStaysWithinItsBound) {
  std::mt19937 rng(5);
  const int64_t m = 6, n = 48, k = 768;
  const Int8Weights w = make_weights(n, k, rng);
  const std::vector<float> x = make_x(m, k, rng);
  std::vector<float> y(size_t(m * n)), y32(size_t(m * n));
  gemm_nt_int8(x.data(), w.values.data(), w.scales.data(), y.data(), m, n, k);
  gemm_nt(x.data(), w.dequantized.data(), DType::F32, y32.data(), m, n, k);
  const double eps = std::ldexp(1.0, -24);
  double worst = 0.0, largest_error = 0.0;
  for (int64_t i = 0; i < m; ++i) {
    double amax = 0.0;
    for (int64_t c = 0; c < k; ++c) amax = std::max(amax, double(std::fabs(x[size_t(i * k + c)])));
    for (int64_t j = 0; j < n; ++j) {
      double wabs = 0.0, xwabs = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        const double wc = std::fabs(double(w.dequantized[size_t(j * k + c)]));
        wabs += wc;
        xwabs += wc * std::fabs(double(x[size_t(i * k + c)]));
      }
      const double yv = y[size_t(i * n + j)], err = std::fabs(yv - double(y32[size_t(i * n + j)]));
      const double bound = amax / 254.0 * wabs + 2.0 * double(k) * eps * xwabs + 6.0 * eps * std::fabs(yv);
      ASSERT_LE(err, bound) << "row " << i << " column " << j;
      worst = std::max(worst, err / bound);
      largest_error = std::max(largest_error, err);
    }
  }
  EXPECT_GT(largest_error, 0.0);
  std::printf("worst error / bound: %.3f\n", worst);
}

TEST(Int8Gemm, ZeroRowGivesZerosAndNonFiniteRowGivesNaN) {
  const int64_t k = 70, n = 20;
  std::mt19937 rng(3);
  const Int8Weights w = make_weights(n, k, rng);
  std::vector<float> x(size_t(2 * k), 0.0f);
  x[size_t(k + 5)] = std::numeric_limits<float>::infinity();
  std::vector<float> y(size_t(2 * n), -1.0f);
  gemm_nt_int8(x.data(), w.values.data(), w.scales.data(), y.data(), 2, n, k);
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(y[size_t(j)], 0.0f) << j;
    EXPECT_TRUE(std::isnan(y[size_t(n + j)])) << j;
  }
}

// A row-parallel layer's ranks each hold a slice of x's columns and of w's. Given the whole row's
// amax (int8_row_amax of each slice, combined by max), each slice is quantized on the whole row's
// grid, so the slices' outputs sum to the unsplit GEMM's but for the float rounding of the sum
// (the integer parts are exact): within 4 eps of the terms. With each slice's own amax they do
// not (row 1's outlier sits in the first slice and sets a coarser grid than the second's).
TEST(Int8Gemm, SlicesQuantizedWithTheWholeRowsAmaxSumToTheUnsplitResult) {
  std::mt19937 rng(8);
  const int64_t m = 4, n = 24, k = 301, k0 = 150, k1 = k - k0;
  const Int8Weights w = make_weights(n, k, rng);
  const std::vector<float> x = make_x(m, k, rng);
  auto columns = [](const auto& v, int64_t rows, int64_t width, int64_t c0, int64_t c1) {
    std::vector<typename std::decay_t<decltype(v)>::value_type> out;
    for (int64_t r = 0; r < rows; ++r) out.insert(out.end(), v.begin() + r * width + c0, v.begin() + r * width + c1);
    return out;
  };
  const std::vector<float> xa = columns(x, m, k, 0, k0), xb = columns(x, m, k, k0, k);
  const std::vector<int8_t> wa = columns(w.values, n, k, 0, k0), wb = columns(w.values, n, k, k0, k);
  std::vector<float> amax(static_cast<size_t>(m)), amax_b(static_cast<size_t>(m));
  int8_row_amax(xa.data(), m, k0, amax.data());
  int8_row_amax(xb.data(), m, k1, amax_b.data());
  for (size_t i = 0; i < amax.size(); ++i) amax[i] = std::max(amax[i], amax_b[i]);
  std::vector<float> whole(size_t(m * n)), ya(size_t(m * n)), yb(size_t(m * n)), own_a(size_t(m * n)),
      own_b(size_t(m * n));
  gemm_nt_int8(x.data(), w.values.data(), w.scales.data(), whole.data(), m, n, k);
  gemm_nt_int8(xa.data(), wa.data(), w.scales.data(), ya.data(), m, n, k0, amax.data());
  gemm_nt_int8(xb.data(), wb.data(), w.scales.data(), yb.data(), m, n, k1, amax.data());
  gemm_nt_int8(xa.data(), wa.data(), w.scales.data(), own_a.data(), m, n, k0);
  gemm_nt_int8(xb.data(), wb.data(), w.scales.data(), own_b.data(), m, n, k1);
  const float eps = std::ldexp(1.0f, -24);
  float own_worst = 0.0f;
  for (size_t e = 0; e < whole.size(); ++e) {
    const float tol = 4.0f * eps * (std::fabs(ya[e]) + std::fabs(yb[e]) + std::fabs(whole[e]));
    ASSERT_NEAR(ya[e] + yb[e], whole[e], tol) << "element " << e;
    own_worst = std::max(own_worst, std::fabs(own_a[e] + own_b[e] - whole[e]) - tol);
  }
  EXPECT_GT(own_worst, 0.0f) << "each slice's own scale should not reproduce the unsplit result";
}

TEST(Int8Gemm, RowAmaxIsInfiniteForARowWithANaNOrAnInfinity) {
  const std::vector<float> x = {1.0f, -3.0f, 2.0f, 0.5f, std::numeric_limits<float>::quiet_NaN(), 1.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> amax(3);
  int8_row_amax(x.data(), 3, 3, amax.data());
  EXPECT_EQ(amax[0], 3.0f);
  EXPECT_EQ(amax[1], std::numeric_limits<float>::infinity());
  EXPECT_EQ(amax[2], 0.0f);
}

TEST(Int8Gemm, DepthBeyondTheInt32BoundIsRefused) {
  float x = 0.0f, y = 0.0f, s = 1.0f;
  int8_t w = 0;
  EXPECT_THROW(gemm_nt_int8(&x, &w, &s, &y, 1, 1, 131073), std::invalid_argument);
}

}  // namespace
}  // namespace tpbatch::cpu
