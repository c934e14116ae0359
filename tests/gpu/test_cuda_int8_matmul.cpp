// W8A8 weights (I8 values, one F32 scale per output row) on CUDA against the CPU backend. Both
// quantize each row of x to int8 by the same rule and sum the same integers, so wherever both see
// the same fp32 x (F32 x, or BF16 x whose values the CPU holds exactly) the F32 outputs are the
// same bits: the tests compare exactly. Shapes: k a multiple of 16 (the GEMV's 16-byte loads, the
// tile's word loads), k odd (bytes, a row's last word cut), m at the GEMV's limit and past it
// (the 64 x 64 tiles, a partial tile in both directions); rows of zeros, of NaN, and rows quantized
// with a larger whole-row amax (a row-parallel slice's input_amax).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "cuda_vs_cpu.h"
#include "kernels.h"

namespace tpbatch {
namespace {

using namespace gpu_test;  // the shared fixture and helpers

struct Int8Weights {
  int64_t n = 0, k = 0;
  std::vector<int8_t> values;  // [n][k]
  Vec scales;                  // [n]
};

Int8Weights make_weights(int64_t n, int64_t k, std::mt19937& rng) {
  Int8Weights w{n, k, {}, {}};
  std::uniform_int_distribution<int> code(-128, 127);
  std::uniform_real_distribution<float> scale(1e-3f, 4e-3f);
  for (int64_t i = 0; i < n * k; ++i) w.values.push_back(int8_t(code(rng)));
  for (int64_t j = 0; j < n; ++j) w.scales.push_back(scale(rng));
  return w;
}

struct OnDevice {
  Buffer values, scales;
  ScaledWeightView view(BufferView input_amax = {}) const {
    ScaledWeightView v{values.view(), scales.view()};
    v.input_amax = input_amax;
    return v;
  }
};

OnDevice upload(Backend& b, const Int8Weights& w) {
  OnDevice d;
  d.values = b.alloc(w.values.size(), DType::I8);
  b.upload(d.values.view(), w.values.data(), w.values.size());
  d.scales = put(b, w.scales, DType::F32);
  return d;
}

// Equal as bits, NaN equal to NaN; the first difference named.
void expect_same_bits(const Vec& got, const Vec& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << what << ": element " << i << " is " << got[i] << ", the CPU's " << want[i];
  }
}

struct Shape {
  int64_t n, k;
};
constexpr Shape kShapes[] = {{67, 256}, {67, 301}, {130, 64}, {33, 1000}};
constexpr int64_t kRows[] = {1, 5, kernels::kQuantizedGemvMaxRows, kernels::kQuantizedGemvMaxRows + 1, 70};

// x with row 1 all zeros and, where m > 3, row 3 holding a NaN.
Vec special_rows(Vec x, int64_t m, int64_t k) {
  if (m > 1) std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);
  if (m > 3) x[size_t(3 * k + k / 2)] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

TEST_F(CudaVsCpu, Int8MatmulEqualsTheCpuBitForBit) {
  ASSERT_TRUE(gpu_->runs_quantized_weights(DType::I8));
  for (const Shape& s : kShapes) {
    const Int8Weights w = make_weights(s.n, s.k, rng_);
    const OnDevice cw = upload(*cpu_, w), gw = upload(*gpu_, w);
    for (int64_t m : kRows)
      for (DType x_type : {DType::F32, act()}) {
        // F32 x with full fp32 values; act() x with values it holds exactly (the CPU's too).
        const Vec x = special_rows(random(size_t(m * s.k), -2.0f, 2.0f, x_type), m, s.k);
        const Buffer cx = put(*cpu_, x, DType::F32), gx = put(*gpu_, x, x_type);
        Buffer cy = cpu_->alloc(size_t(m * s.n), DType::F32), gy = gpu_->alloc(size_t(m * s.n), DType::F32);
        cpu_->matmul_nt_scaled(cx.view(), cw.view(), cy.view(), m, s.n, s.k);
        gpu_->matmul_nt_scaled(gx.view(), gw.view(), gy.view(), m, s.n, s.k);
        const Vec want = get(*cpu_, cy);
        const std::string what = "n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + " m=" +
                                 std::to_string(m) + " x " + dtype_name(x_type);
        expect_same_bits(get(*gpu_, gy), want, what);
        if (m > 3) EXPECT_TRUE(std::isnan(want[size_t(3 * s.n)])) << what << ": a row with a NaN gives NaN";
        if (m > 1) EXPECT_EQ(want[size_t(s.n)], 0.0f) << what << ": a zero row gives zeros";
        // The activation dtype out: the same values rounded once.
        Buffer gya = gpu_->alloc(size_t(m * s.n), act());
        gpu_->matmul_nt_scaled(gx.view(), gw.view(), gya.view(), m, s.n, s.k);
        Vec rounded = want;
        for (float& v : rounded) v = round_to(act(), v);
        expect_same_bits(get(*gpu_, gya), rounded, what + " out " + dtype_name(act()));
      }
  }
}

TEST_F(CudaVsCpu, Int8MatmulQuantizesWithTheGivenWholeRowAmax) {
  const Int8Weights w = make_weights(67, 256, rng_);
  const OnDevice cw = upload(*cpu_, w), gw = upload(*gpu_, w);
  for (int64_t m : {int64_t{3}, int64_t{40}}) {
    const Vec x = random(size_t(m * w.k), -1.0f, 1.0f, DType::F32);
    // Each row's whole-row amax above its slice's own, as other ranks' columns make it.
    Vec amax = Vec(size_t(m));
    for (int64_t i = 0; i < m; ++i) amax[size_t(i)] = 1.5f + 0.25f * float(i);
    const Buffer cx = put(*cpu_, x, DType::F32), gx = put(*gpu_, x, DType::F32);
    const Buffer ca = put(*cpu_, amax, DType::F32), ga = put(*gpu_, amax, DType::F32);
    Buffer cy = cpu_->alloc(size_t(m * w.n), DType::F32), gy = gpu_->alloc(size_t(m * w.n), DType::F32);
    Buffer own = cpu_->alloc(size_t(m * w.n), DType::F32);
    cpu_->matmul_nt_scaled(cx.view(), cw.view(ca.view()), cy.view(), m, w.n, w.k);
    gpu_->matmul_nt_scaled(gx.view(), gw.view(ga.view()), gy.view(), m, w.n, w.k);
    cpu_->matmul_nt_scaled(cx.view(), cw.view(), own.view(), m, w.n, w.k);
    const std::string what = "m=" + std::to_string(m);
    expect_same_bits(get(*gpu_, gy), get(*cpu_, cy), what);
    EXPECT_NE(get(*cpu_, cy), get(*cpu_, own)) << what << ": the given amax changes the quantization";
  }
}

TEST_F(CudaVsCpu, Int8RowAmaxEqualsTheCpu) {
  const int64_t m = 6, k = 301;
  Vec x = random(size_t(m * k), -3.0f, 3.0f, DType::F32);
  std::fill(x.begin() + k, x.begin() + 2 * k, 0.0f);                 // row 1: zeros
  x[size_t(2 * k + 7)] = std::numeric_limits<float>::quiet_NaN();     // row 2: NaN -> +inf
  x[size_t(3 * k + 300)] = -std::numeric_limits<float>::infinity();   // row 3: -inf -> +inf
  x[size_t(4 * k + 150)] = -9.5f;                                     // row 4: a negative maximum
  const Buffer cx = put(*cpu_, x, DType::F32), gx = put(*gpu_, x, DType::F32);
  Buffer ca = cpu_->alloc(size_t(m), DType::F32), ga = gpu_->alloc(size_t(m), DType::F32);
  cpu_->int8_row_amax(cx.view(), ca.view(), m, k);
  gpu_->int8_row_amax(gx.view(), ga.view(), m, k);
  const Vec want = get(*cpu_, ca);
  expect_same_bits(get(*gpu_, ga), want, "int8_row_amax");
  EXPECT_EQ(want[1], 0.0f);
  EXPECT_EQ(want[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(want[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(want[4], 9.5f);
}

}  // namespace
}  // namespace tpbatch
