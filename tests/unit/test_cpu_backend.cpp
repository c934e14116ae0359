// The CPU backend's kernels against plain double-precision loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"

namespace {

using tpbatch::AttentionSeq;
using tpbatch::KvLayout;

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

TEST(CpuBackend, MatmulNtEqualsNaiveProduct) {
  auto be = tpbatch::make_cpu_backend();
  for (int64_t m : {1, 5}) {
    const int64_t n = 7, k = 13;
    auto x = random_vec(m * k, 1), w = random_vec(n * k, 2);
    std::vector<float> y(m * n);
    be->matmul_nt(x.data(), w.data(), y.data(), m, n, k);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t t = 0; t < k; ++t) ref += double(x[i * k + t]) * w[j * k + t];
        EXPECT_NEAR(y[i * n + j], ref, 1e-4);
      }
  }
}

TEST(CpuBackend, RmsnormScalesByRootMeanSquare) {
  auto be = tpbatch::make_cpu_backend();
  auto x = random_vec(3 * 8, 3), w = random_vec(8, 4);
  std::vector<float> out(24);
  be->rmsnorm(x.data(), w.data(), out.data(), 3, 8, 1e-5f);
  for (int i = 0; i < 3; ++i) {
    double ss = 0;
    for (int j = 0; j < 8; ++j) ss += double(x[i * 8 + j]) * x[i * 8 + j];
    const double inv = 1.0 / std::sqrt(ss / 8 + 1e-5);
    for (int j = 0; j < 8; ++j) EXPECT_NEAR(out[i * 8 + j], x[i * 8 + j] * inv * w[j], 1e-5);
  }
}

TEST(CpuBackend, RopeRotatesHalvesByPositionTimesFrequency) {
  auto be = tpbatch::make_cpu_backend();
  const int64_t heads = 2, hd = 8, rows = 3;
  auto x = random_vec(rows * heads * hd, 5);
  auto orig = x;
  std::vector<float> inv(hd / 2);
  for (int i = 0; i < hd / 2; ++i) inv[i] = float(1.0 / std::pow(10000.0, 2.0 * i / hd));
  std::vector<int32_t> pos = {0, 7, 300};
  be->rope(x.data(), rows, heads * hd, heads, hd, pos.data(), inv.data());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const float* o = orig.data() + r * heads * hd + h * hd;
        const double a = double(pos[r]) * inv[i];
        EXPECT_NEAR(x[r * heads * hd + h * hd + i], o[i] * std::cos(a) - o[i + hd / 2] * std::sin(a), 1e-5);
        EXPECT_NEAR(x[r * heads * hd + h * hd + i + hd / 2], o[i + hd / 2] * std::cos(a) + o[i] * std::sin(a), 1e-5);
      }
}

TEST(CpuBackend, SiluMulGatesUp) {
  auto be = tpbatch::make_cpu_backend();
  auto gu = random_vec(2 * 2 * 5, 6);
  std::vector<float> out(10);
  be->silu_mul(gu.data(), out.data(), 2, 5);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 5; ++i) {
      const double g = gu[r * 10 + i], u = gu[r * 10 + 5 + i];
      EXPECT_NEAR(out[r * 5 + i], g / (1 + std::exp(-g)) * u, 1e-5);
    }
}

// Naive causal GQA attention over contiguous K/V of one sequence, in double.
std::vector<double> naive_attention(const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, int64_t len, int64_t q_heads, int64_t kv_heads,
                                    int64_t hd, int64_t window) {
  std::vector<double> out(len * q_heads * hd);
  for (int64_t i = 0; i < len; ++i)
    for (int64_t h = 0; h < q_heads; ++h) {
      const int64_t g = h / (q_heads / kv_heads);
      const int64_t first = window > 0 ? std::max<int64_t>(0, i - window + 1) : 0;
      std::vector<double> s;
      double mx = -1e300;
      for (int64_t j = first; j <= i; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += double(q[(i * q_heads + h) * hd + d]) * k[(j * kv_heads + g) * hd + d];
        s.push_back(dot / std::sqrt(double(hd)));
        mx = std::max(mx, s.back());
      }
      double z = 0;
      for (auto& e : s) z += (e = std::exp(e - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = first; j <= i; ++j) acc += s[j - first] * v[(j * kv_heads + g) * hd + d];
        out[(i * q_heads + h) * hd + d] = acc / z;
      }
    }
  return out;
}

// Prefill in two chunks through shuffled cache blocks equals the naive loop, for full and windowed attention.
void check_paged_attention(int64_t window) {
  auto be = tpbatch::make_cpu_backend();
  const int64_t q_heads = 4, kv_heads = 2, hd = 8, len = 37, bs = 4;
  KvLayout kv{16, kv_heads, bs, hd, window};
  std::vector<float> kc(kv.floats_per_layer()), vc(kv.floats_per_layer());
  std::vector<int32_t> blocks = {9, 3, 14, 0, 7, 12, 5, 1, 10, 2};  // 10 blocks cover 40 positions
  auto q = random_vec(len * q_heads * hd, 7), k = random_vec(len * kv_heads * hd, 8), v = random_vec(len * kv_heads * hd, 9);
  std::vector<float> out(len * q_heads * hd);
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 20}, {20, len}}) {
    AttentionSeq s{0, end - begin, begin, blocks.data(), 10};
    be->paged_attention(q.data() + begin * q_heads * hd, q_heads * hd, k.data() + begin * kv_heads * hd,
                        v.data() + begin * kv_heads * hd, kv_heads * hd, kc.data(), vc.data(), kv, q_heads, &s, 1,
                        out.data() + begin * q_heads * hd);
  }
  const auto ref = naive_attention(q, k, v, len, q_heads, kv_heads, hd, window);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i], 1e-5) << i;
}

TEST(CpuBackend, PagedAttentionEqualsNaiveCausalGqa) { check_paged_attention(0); }
TEST(CpuBackend, PagedAttentionHonoursSlidingWindow) { check_paged_attention(5); }

TEST(CpuBackend, EmbeddingZeroesIdsOutsideTheShard) {
  auto be = tpbatch::make_cpu_backend();
  std::vector<float> table = {1, 2, 3, 4};  // ids 10 and 11, dim 2
  std::vector<int32_t> ids = {11, 3, 10};
  std::vector<float> out(6, -1);
  be->embedding(ids.data(), 3, table.data(), 10, 12, 2, out.data());
  EXPECT_EQ(out, (std::vector<float>{3, 4, 0, 0, 1, 2}));
}

}  // namespace
