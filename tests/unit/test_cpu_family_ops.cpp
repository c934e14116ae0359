// The CPU backend's operations for the families beyond Llama against double loops
// written here: per-head RMSNorm, GeGLU-tanh, scale, soft-cap, and attention with its own score
// scale and soft-capping. In checked mode, so a host access outside a backend call crashes.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend_test_util.h"

namespace {

using tpbatch::AttentionSeq;
using tpbatch::Backend;
using tpbatch::Buffer;
using tpbatch::DType;
using tpbatch::KvLayout;
using tpbatch::StepBatch;

std::unique_ptr<Backend> checked() { return tpbatch::make_cpu_backend({.checked = true}); }

using tpbatch::test::get;
using tpbatch::test::put;
using tpbatch::test::random_vec;

TEST(CpuFamilyOps, RmsnormHeadsNormalisesEachHeadOfTheStridedRowsOnly) {
  auto be = checked();
  const int64_t rows = 3, stride = 40, heads = 2, hd = 8, eps_exp = 6;
  auto x = random_vec(rows * stride, 1, 3.0f), w = random_vec(hd, 2);
  Buffer bx = put(*be, x), bw = put(*be, w);
  be->rmsnorm_heads(bx.view(4), rows, stride, heads, hd, bw.view(), 1e-6f);  // heads start at column 4
  const auto out = get(*be, bx);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < stride; ++c) {
      const int64_t h = (c - 4) / hd;
      const size_t i = size_t(r * stride + c);
      if (c < 4 || h >= heads) {
        EXPECT_EQ(out[i], x[i]) << "untouched element " << r << "," << c;
        continue;
      }
      double ss = 0;
      for (int64_t d = 0; d < hd; ++d) ss += double(x[r * stride + 4 + h * hd + d]) * x[r * stride + 4 + h * hd + d];
      const double want = x[i] / std::sqrt(ss / hd + std::pow(10.0, -eps_exp)) * w[(c - 4) % hd];
      EXPECT_NEAR(out[i], want, 1e-5) << r << "," << c;
    }
}

TEST(CpuFamilyOps, GeluTanhMulGatesUp) {
  auto be = checked();
  auto gu = random_vec(2 * 10, 3, 2.0f);
  Buffer bgu = put(*be, gu), bo = be->alloc(2 * 5, DType::F32);
  be->gelu_tanh_mul(bgu.view(), bo.view(), 2, 5);
  const auto out = get(*be, bo);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 5; ++i) {
      const double g = gu[r * 10 + i], u = gu[r * 10 + 5 + i];
      const double gelu = 0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
      EXPECT_NEAR(out[r * 5 + i], gelu * u, 1e-5);
    }
}

TEST(CpuFamilyOps, ScaleAndSoftcap) {
  auto be = checked();
  auto x = random_vec(50, 4, 20.0f);
  Buffer b = put(*be, x);
  be->scale(b.view(), x.size(), 0.5f);
  be->softcap(b.view(), x.size(), 3.0f);
  const auto out = get(*be, b);
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(out[i], 3.0 * std::tanh(0.5 * x[i] / 3.0), 1e-5);
    EXPECT_LE(std::abs(out[i]), 3.0f);
  }
}

// Attention with KvLayout::scale and ::softcap equals the naive loop that scales, caps, then masks.
TEST(CpuFamilyOps, PagedAttentionHonoursScoreScaleAndSoftcap) {
  auto be = checked();
  const int64_t q_heads = 4, kv_heads = 2, hd = 8, len = 13, bs = 4, window = 5;
  const float scale = 0.3f, cap = 1.5f;
  KvLayout kv{8, kv_heads, bs, hd, window, DType::F32};
  kv.scale = scale;
  kv.softcap = cap;
  Buffer kc = be->alloc(kv.elements_per_layer(), DType::F32), vc = be->alloc(kv.elements_per_layer(), DType::F32);
  std::vector<int32_t> blocks = {5, 2, 7, 0};
  auto q = random_vec(len * q_heads * hd, 7, 2.0f), k = random_vec(len * kv_heads * hd, 8), v = random_vec(len * kv_heads * hd, 9);
  Buffer bq = put(*be, q), bk = put(*be, k), bv = put(*be, v), bo = be->alloc(len * q_heads * hd, DType::F32);
  AttentionSeq s{0, len, 0, blocks.data(), 4};
  std::vector<int32_t> ids(len), pos(len);
  be->begin_step(StepBatch{ids, pos, std::span<const AttentionSeq>(&s, 1), {}, {}});
  be->paged_attention(bq.view(), q_heads * hd, bk.view(), bv.view(), kv_heads * hd, kc.view(), vc.view(), kv, q_heads,
                      bo.view());
  const auto out = get(*be, bo);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t g = h / (q_heads / kv_heads), first = std::max<int64_t>(0, i - window + 1);
      std::vector<double> sc;
      double mx = -1e300;
      for (int64_t j = first; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += double(q[(i * q_heads + h) * hd + d]) * k[(j * kv_heads + g) * hd + d];
        sc.push_back(cap * std::tanh(dot * scale / cap));
        mx = std::max(mx, sc.back());
      }
      double z = 0;
      for (auto& e : sc) z += (e = std::exp(e - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = first; j <= i; ++j) acc += sc[j - first] * v[(j * kv_heads + g) * hd + d];
        ASSERT_NEAR(out[(i * q_heads + h) * hd + d], acc / z, 1e-5) << i << "," << h << "," << d;
      }
    }
}

}  // namespace
