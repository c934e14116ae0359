// Quantized weights on CUDA (matmul_nt_scaled) against the CPU backend and against a reference
// dequantization written here from the layout alone (backend.h's ScaledWeightView): fp8 (e4m3)
// with 128-column block scales, block scales of a tensor-parallel shard that starts inside a block
// (phase), per-channel scales; 4-bit values with zero points in groups of 32 and 128 with a phase,
// odd k (a row's last byte half used) and one group a row. m = 1 and 5 take the in-register GEMV
// (weights dequantized to fp32, as the CPU's), m = 40 the BF16 slices + cuBLAS (each weight
// rounded to bf16 once more), with the default scratch and one shrunk to 16-row slices.
// Tolerances: against the CPU backend, the 1e-2 relative L2 error of every CudaVsCpu test (bf16
// activations out); with F32 out against the reference on the very weights each path multiplies,
// 1e-5 (fp32 accumulation order alone). Every e4m3 code and every 4-bit code are checked exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/dequantize_slices.h"
#include "common/error.h"
#include "cuda_vs_cpu.h"
#include "kernels.h"

namespace tpbatch {
namespace {

using namespace gpu_test;  // the shared fixture and helpers

struct Quantized {
  DType dtype = DType::F8E4M3;
  int64_t n = 0, k = 0, groups = 1, group = 1, phase = 0;
  std::vector<uint8_t> values;  // [n][k] bytes (fp8) or [n][(k + 1) / 2] (I4, low nibble first)
  Vec scales, zeros;            // [n][groups]
  Vec dequantized;              // [n][k]: the reference, fp32

  int64_t scale_index(int64_t r, int64_t c) const { return r * groups + (c + phase) / group; }
  // codes[r * k + c] into the layout; the reference from it.
  void fill(const std::vector<int>& codes) {
    const bool int4 = dtype == DType::I4;
    const int64_t ldv = int4 ? (k + 1) / 2 : k;
    values.assign(size_t(n * ldv), 0);
    dequantized.clear();
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        const int v = codes[size_t(r * k + c)];
        const size_t i = size_t(scale_index(r, c));
        if (int4) {
          values[size_t(r * ldv + c / 2)] |= uint8_t(v << (4 * (c % 2)));
          dequantized.push_back((float(v) - zeros[i]) * scales[i]);
        } else {
          values[size_t(r * ldv + c)] = uint8_t(v);
          dequantized.push_back(f8e4m3_to_f32(uint8_t(v)) * scales[i]);
        }
      }
  }
};

Quantized make_quantized(DType dtype, int64_t n, int64_t k, int64_t group, int64_t phase, std::mt19937& rng) {
  Quantized q;
  q.dtype = dtype;
  q.n = n, q.k = k, q.group = group, q.phase = phase;
  q.groups = (phase + k + group - 1) / group;
  const bool int4 = dtype == DType::I4;
  std::uniform_real_distribution<float> scale(int4 ? 2e-2f : 1e-3f, int4 ? 8e-2f : 4e-3f);
  std::uniform_int_distribution<int> code(0, int4 ? 15 : 255);
  for (int64_t i = 0; i < n * q.groups; ++i) {
    q.scales.push_back(scale(rng));
    if (int4) q.zeros.push_back(float(code(rng)));
  }
  std::vector<int> codes(size_t(n * k));
  for (int& c : codes) {
    c = code(rng);
    if (!int4 && (c & 0x7f) == 0x7f) c = 0;  // no NaN in products that are summed
  }
  q.fill(codes);
  return q;
}

struct OnDevice {
  Buffer values, scales, zeros;
  ScaledWeightView view(const Quantized& q) const {
    return {values.view(), scales.view(), q.groups, q.group, q.phase, zeros.empty() ? BufferView{} : zeros.view()};
  }
};

OnDevice upload(Backend& b, const Quantized& q) {
  OnDevice d;
  d.values = b.alloc(q.values.size(), q.dtype);  // I4: counted in bytes, as the loader allocates it
  b.upload(d.values.view(), q.values.data(), q.values.size());
  d.scales = put(b, q.scales, DType::F32);
  if (q.dtype == DType::I4) d.zeros = put(b, q.zeros, DType::F32);
  return d;
}

Vec bf16_rounded(const Vec& v) {
  Vec out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = round_to(DType::BF16, v[i]);
  return out;
}

struct Grid {
  DType dtype;
  int64_t k, group, phase;
};

TEST_F(CudaVsCpu, ScaledMatmulOfFp8AndInt4WeightsMatchesCpu) {
  ASSERT_TRUE(gpu_->runs_quantized_weights(DType::F8E4M3));
  ASSERT_TRUE(gpu_->runs_quantized_weights(DType::I4));
  const int64_t n = 67;
  // k = 300 / 301 and phases that cut a 16-byte chunk (23, and 16 for I4's 32-weight chunks) take
  // the GEMV's scalar path; the others its packed one (and the 8-weight runs of dequantize_rows).
  const Grid grids[] = {{DType::F8E4M3, 300, 128, 0}, {DType::F8E4M3, 300, 128, 23}, {DType::F8E4M3, 300, 300, 0},
                        {DType::F8E4M3, 256, 128, 0}, {DType::F8E4M3, 256, 128, 48}, {DType::F8E4M3, 512, 512, 0},
                        {DType::I4, 301, 32, 16},     {DType::I4, 256, 128, 64},     {DType::I4, 256, 256, 0},
                        {DType::I4, 256, 128, 16}};
  for (const Grid& g : grids) {
    const Quantized q = make_quantized(g.dtype, n, g.k, g.group, g.phase, rng_);
    const OnDevice cq = upload(*cpu_, q), gq = upload(*gpu_, q);
    const Buffer exact = put(*cpu_, q.dequantized, DType::F32), rounded = put(*cpu_, bf16_rounded(q.dequantized), DType::F32);
    for (int64_t m : {1, 5, 40})
      for (int64_t limit : {int64_t{0}, 16 * 2 * g.k}) {
        if (limit != 0 && m <= kernels::kQuantizedGemvMaxRows) continue;  // the GEMV takes no slices
        set_dequantize_scratch_bytes_for_testing(limit);
        const Vec x = random(size_t(m * g.k));
        const auto [cx, gx] = both(x);
        Buffer cy = cpu_->alloc(size_t(m * n), DType::F32), ref = cpu_->alloc(size_t(m * n), DType::F32);
        cpu_->matmul_nt_scaled(cx.view(), cq.view(q), cy.view(), m, n, g.k);
        const bool sliced = m > kernels::kQuantizedGemvMaxRows;
        cpu_->matmul_nt(cx.view(), (sliced ? rounded : exact).view(), ref.view(), m, n, g.k);
        const std::string what = std::string(dtype_name(g.dtype)) + " k=" + std::to_string(g.k) + " group=" +
                                 std::to_string(g.group) + " phase=" + std::to_string(g.phase) + " m=" +
                                 std::to_string(m) + " slice limit=" + std::to_string(limit);
        for (DType out : {act(), DType::F32}) {
          Buffer gy = gpu_->alloc(size_t(m * n), out);
          gpu_->matmul_nt_scaled(gx.view(), gq.view(q), gy.view(), m, n, g.k);
          const Vec got = get(*gpu_, gy);
          EXPECT_LT(rel(got, get(*cpu_, cy)), 1e-2) << what << " out " << dtype_name(out);
          if (out == DType::F32) EXPECT_LT(rel_err(got, get(*cpu_, ref)), 1e-5) << what << " against the reference";
        }
      }
  }
  set_dequantize_scratch_bytes_for_testing(0);
}

// y = x · wᵀ with one-hot rows of x picks single weights: y[i][r] = w[r][c_i] exactly, on both
// paths (a row of weights holding NaN makes its outputs NaN).
void expect_exact_weights(CudaVsCpu& t, const Quantized& q, const std::string& what) {
  const OnDevice d = upload(*t.gpu_, q);
  for (bool sliced : {false, true}) {
    const Vec want_w = sliced ? bf16_rounded(q.dequantized) : q.dequantized;
    for (int64_t c0 = 0; c0 < q.k; c0 += kernels::kQuantizedGemvMaxRows) {
      const int64_t cols = std::min<int64_t>(kernels::kQuantizedGemvMaxRows, q.k - c0);
      const int64_t m = sliced ? kernels::kQuantizedGemvMaxRows + 1 : cols;  // a zero row makes up the rest
      Vec x(size_t(m * q.k), 0.0f);
      for (int64_t i = 0; i < cols; ++i) x[size_t(i * q.k + c0 + i)] = 1.0f;
      const Buffer gx = put(*t.gpu_, x, DType::BF16);
      Buffer gy = t.gpu_->alloc(size_t(m * q.n), DType::F32);
      t.gpu_->matmul_nt_scaled(gx.view(), d.view(q), gy.view(), m, q.n, q.k);
      const Vec y = get(*t.gpu_, gy);
      for (int64_t r = 0; r < q.n; ++r) {
        bool nan_row = false;
        for (int64_t c = 0; c < q.k; ++c) nan_row |= std::isnan(want_w[size_t(r * q.k + c)]);
        for (int64_t i = 0; i < cols; ++i) {
          const float got = y[size_t(i * q.n + r)], want = want_w[size_t(r * q.k + c0 + i)];
          if (nan_row) {
            EXPECT_TRUE(std::isnan(got)) << what << " row " << r;
          } else {
            ASSERT_EQ(got, want) << what << (sliced ? " (bf16 slices)" : " (GEMV)") << " row " << r << " column "
                                 << c0 + i;
          }
        }
      }
    }
  }
}

TEST_F(CudaVsCpu, ScaledMatmulDequantizesEveryFp8AndInt4CodeExactly) {
  // fp8: the 256 codes (subnormals, both zeros, 448, NaN) at scale 0.37, as 32 rows x 8 columns
  // (the GEMV's scalar path) and as 16 x 16 (its packed path: whole 16-byte chunks).
  std::vector<int> codes(256);
  for (int i = 0; i < 256; ++i) codes[size_t(i)] = i;
  for (int64_t k : {8, 16}) {
    Quantized f;
    f.n = 256 / k, f.k = k, f.groups = 1, f.group = k;
    f.scales.assign(size_t(f.n), 0.37f);
    f.fill(codes);
    expect_exact_weights(*this, f, "fp8 k=" + std::to_string(k));
  }
  // 4-bit, packed path: every code twice a row, zero points 0..16 over 17 rows, a group a row.
  Quantized p;
  p.dtype = DType::I4;
  p.n = 17, p.k = 32, p.group = 32, p.groups = 1;
  for (int64_t i = 0; i < p.n; ++i) {
    p.scales.push_back(0.013f * float(1 + i % 7));
    p.zeros.push_back(float(i));
  }
  std::vector<int> packed_nibbles(size_t(p.n * p.k));
  for (size_t i = 0; i < packed_nibbles.size(); ++i) packed_nibbles[i] = int((i * 7 + i / 32) % 16);
  p.fill(packed_nibbles);
  expect_exact_weights(*this, p, "int4 packed");
  // 4-bit: every code against every zero point, in groups of 4 from phase 2 (a group cut by the row start).
  Quantized g;
  g.dtype = DType::I4;
  g.n = 16, g.k = 16, g.group = 4, g.phase = 2, g.groups = 5;
  for (int64_t i = 0; i < g.n * g.groups; ++i) {
    g.scales.push_back(0.013f * float(1 + i % 7));
    g.zeros.push_back(float(i % 17));  // 0..16: gptq's zero + 1 reaches 16
  }
  std::vector<int> nibbles(size_t(g.n * g.k));
  for (size_t i = 0; i < nibbles.size(); ++i) nibbles[i] = int((i * 7 + i / 16) % 16);
  g.fill(nibbles);
  expect_exact_weights(*this, g, "int4");
}

TEST_F(CudaVsCpu, ScaledMatmulRefusesOtherWeightDtypesNamingThem) {
  Buffer w = gpu_->alloc(64, DType::BF16), s = gpu_->alloc(8, DType::F32);
  for (int64_t m : {1, 40}) {
    Buffer xs = gpu_->alloc(size_t(m * 8), act()), y = gpu_->alloc(size_t(m * 8), act());
    try {
      gpu_->matmul_nt_scaled(xs.view(), ScaledWeightView{w.view(), s.view(), 1, 8, 0, {}}, y.view(), m, 8, 8);
      ADD_FAILURE() << "BF16 values taken as quantized weights";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("quantized weights of dtype BF16 are not supported"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace tpbatch
