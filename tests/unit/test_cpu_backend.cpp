// The CPU backend's kernels against plain double-precision loops written here.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
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

using tpbatch::test::get;
using tpbatch::test::put;
using tpbatch::test::random_vec;

TEST(CpuBackend, MatmulNtEqualsNaiveProduct) {
  auto be = tpbatch::make_cpu_backend();
  for (int64_t m : {1, 5}) {
    const int64_t n = 7, k = 13;
    auto x = random_vec(m * k, 1), w = random_vec(n * k, 2);
    Buffer bx = put(*be, x), bw = put(*be, w), by = be->alloc(m * n, DType::F32);
    be->matmul_nt(bx.view(), bw.view(), by.view(), m, n, k);
    const auto y = get(*be, by);
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
  Buffer bx = put(*be, x), bw = put(*be, w), bo = be->alloc(24, DType::F32);
  be->rmsnorm(bx.view(), bw.view(), bo.view(), 3, 8, 1e-5f);
  const auto out = get(*be, bo);
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
  std::vector<int32_t> pos = {0, 7, 300}, ids(3, 0);
  be->begin_step(StepBatch{ids, pos, {}, {}, {}});
  Buffer bx = put(*be, x), binv = put(*be, inv);
  be->rope(bx.view(), heads * hd, heads, hd, binv.view());
  x = get(*be, bx);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const float* o = orig.data() + r * heads * hd + h * hd;
        const double a = double(pos[r]) * inv[i];
        EXPECT_NEAR(x[r * heads * hd + h * hd + i], o[i] * std::cos(a) - o[i + hd / 2] * std::sin(a), 1e-5);
        EXPECT_NEAR(x[r * heads * hd + h * hd + i + hd / 2], o[i + hd / 2] * std::cos(a) + o[i] * std::sin(a), 1e-5);
      }
}

TEST(CpuBackend, RopeTurnsEachRowByItsTable) {
  auto be = tpbatch::make_cpu_backend();
  const int64_t hd = 4, rows = 2;
  std::vector<float> x(rows * hd, 0.0f);
  x[0] = x[hd] = 1.0f;  // (1, 0) in the first pair of each row: becomes (cos, sin) of its angle
  const std::vector<float> tables = {0.5f, 1.0f, 0.25f, 1.0f};  // two tables of hd / 2
  std::vector<int32_t> pos = {4, 4}, ids(2, 0), which = {1, 0};
  be->begin_step(StepBatch{ids, pos, {}, {}, {}, which});
  Buffer bx = put(*be, x), binv = put(*be, tables);
  be->rope(bx.view(), hd, 1, hd, binv.view());
  x = get(*be, bx);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);  // table 1: 4 * 0.25
  EXPECT_NEAR(x[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[hd], std::cos(2.0), 1e-6);  // table 0: 4 * 0.5
  EXPECT_NEAR(x[hd + 2], std::sin(2.0), 1e-6);
}

TEST(CpuBackend, SiluMulGatesUp) {
  auto be = tpbatch::make_cpu_backend();
  auto gu = random_vec(2 * 2 * 5, 6);
  Buffer bgu = put(*be, gu), bo = be->alloc(10, DType::F32);
  be->silu_mul(bgu.view(), bo.view(), 2, 5);
  const auto out = get(*be, bo);
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
void check_paged_attention(int64_t window, DType kv_dtype = DType::F32) {
  auto be = tpbatch::make_cpu_backend();
  const int64_t q_heads = 4, kv_heads = 2, hd = 8, len = 37, bs = 4;
  KvLayout kv{16, kv_heads, bs, hd, window, kv_dtype};
  Buffer kc = be->alloc(kv.elements_per_layer(), kv_dtype), vc = be->alloc(kv.elements_per_layer(), kv_dtype);
  std::vector<int32_t> blocks = {9, 3, 14, 0, 7, 12, 5, 1, 10, 2};  // 10 blocks cover 40 positions
  auto q = random_vec(len * q_heads * hd, 7), k = random_vec(len * kv_heads * hd, 8), v = random_vec(len * kv_heads * hd, 9);
  Buffer bq = put(*be, q), bk = put(*be, k), bv = put(*be, v), bo = be->alloc(len * q_heads * hd, DType::F32);
  for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 20}, {20, len}}) {
    AttentionSeq s{0, end - begin, begin, blocks.data(), 10};
    std::vector<int32_t> ids(end - begin), pos(end - begin);
    be->begin_step(StepBatch{ids, pos, std::span<const AttentionSeq>(&s, 1), {}, {}});
    be->paged_attention(bq.view(begin * q_heads * hd), q_heads * hd, bk.view(begin * kv_heads * hd),
                        bv.view(begin * kv_heads * hd), kv_heads * hd, kc.view(), vc.view(), kv, q_heads,
                        bo.view(begin * q_heads * hd));
  }
  const auto out = get(*be, bo);
  const auto ref = naive_attention(q, k, v, len, q_heads, kv_heads, hd, window);
  // A bf16 cache rounds K and V to 8 significant bits.
  const double tol = kv_dtype == DType::F32 ? 1e-5 : 2e-2;
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(out[i], ref[i], tol) << i;
}

TEST(CpuBackend, PagedAttentionEqualsNaiveCausalGqa) { check_paged_attention(0); }
TEST(CpuBackend, PagedAttentionHonoursSlidingWindow) { check_paged_attention(5); }
TEST(CpuBackend, PagedAttentionOverABf16CacheStaysWithinBf16Rounding) { check_paged_attention(0, DType::BF16); }

TEST(CpuBackend, EmbeddingZeroesIdsOutsideTheShard) {
  auto be = tpbatch::make_cpu_backend();
  std::vector<float> table = {1, 2, 3, 4};  // ids 10 and 11, dim 2
  std::vector<int32_t> ids = {11, 3, 10}, pos = {0, 1, 2};
  be->begin_step(StepBatch{ids, pos, {}, {}, {}});
  Buffer bt = put(*be, table), bo = be->alloc(6, DType::F32);
  be->embedding(bt.view(), 10, 12, 2, bo.view());
  EXPECT_EQ(get(*be, bo), (std::vector<float>{3, 4, 0, 0, 1, 2}));
}

TEST(CpuBackend, EmbeddingWidensBf16Rows) {
  auto be = tpbatch::make_cpu_backend();
  std::vector<uint16_t> table = {tpbatch::f32_to_bf16(1.5f), tpbatch::f32_to_bf16(-2.0f)};  // id 0, dim 2
  std::vector<int32_t> ids = {0}, pos = {0};
  be->begin_step(StepBatch{ids, pos, {}, {}, {}});
  Buffer bt = put(*be, table, DType::BF16), bo = be->alloc(2, DType::F32);
  be->embedding(bt.view(), 0, 1, 2, bo.view());
  EXPECT_EQ(get(*be, bo), (std::vector<float>{1.5f, -2.0f}));
}

TEST(CpuBackend, AddRmsnormAddsTheResidualThenNormalises) {
  auto be = tpbatch::make_cpu_backend();
  auto x = random_vec(2 * 6, 11), r = random_vec(2 * 6, 12), w = random_vec(6, 13);
  Buffer bx = put(*be, x), br = put(*be, r), bw = put(*be, w), bo = be->alloc(12, DType::F32);
  be->add_rmsnorm(bx.view(), br.view(), bw.view(), bo.view(), 2, 6, 1e-6f);
  const auto sum = get(*be, bx), out = get(*be, bo);
  for (int i = 0; i < 2; ++i) {
    double ss = 0;
    for (int j = 0; j < 6; ++j) {
      EXPECT_FLOAT_EQ(sum[i * 6 + j], x[i * 6 + j] + r[i * 6 + j]);
      ss += double(sum[i * 6 + j]) * sum[i * 6 + j];
    }
    for (int j = 0; j < 6; ++j) EXPECT_NEAR(out[i * 6 + j], sum[i * 6 + j] / std::sqrt(ss / 6 + 1e-6) * w[j], 1e-5);
  }
}

TEST(CpuBackend, LogitStatsGiveMaxLowestArgmaxSumExpAndTarget) {
  auto be = tpbatch::make_cpu_backend();
  std::vector<float> logits = {1, 3, 3, 0, /* row 2 */ -1, -2, -3, -4};
  std::vector<int32_t> ids(2), pos(2), targets = {102, 7};
  std::vector<int64_t> rows = {0, 1};
  be->begin_step(StepBatch{ids, pos, {}, rows, targets});
  Buffer bl = put(*be, logits), bs = be->alloc(8, DType::F32);
  be->logit_stats(bl.view(), 2, 4, 100, 0, bs.view());
  std::vector<tpbatch::LogitStats> st(2);
  be->download(bs.view(), st.data(), sizeof(tpbatch::LogitStats) * 2);
  EXPECT_EQ(st[0].max_logit, 3);
  EXPECT_EQ(st[0].argmax, 101);  // the lowest id among the maxima
  EXPECT_NEAR(st[0].sum_exp, std::exp(-2.0) + 2 + std::exp(-3.0), 1e-6);
  EXPECT_EQ(st[0].target_logit, 3);  // id 102
  EXPECT_TRUE(std::isnan(st[1].target_logit));  // id 7 is not in [100, 104)
}

// The checked mode's promise: backend memory cannot be read behind the backend's back.
TEST(CheckedCpuBackend, HostReadOfBackendMemoryCrashes) {
  auto be = tpbatch::make_cpu_backend({.checked = true});
  Buffer b = put(*be, std::vector<float>{1, 2, 3});
  EXPECT_DEATH({ volatile float f = b.view().as<float>()[1]; (void)f; }, "");
}

TEST(CheckedCpuBackend, DownloadAndBackendCallsStillWork) {
  auto be = tpbatch::make_cpu_backend({.checked = true});
  Buffer x = put(*be, std::vector<float>{1, 2, 3}), y = put(*be, std::vector<float>{10, 20, 30});
  be->add(x.view(), y.view(), 3);
  EXPECT_EQ(get(*be, x), (std::vector<float>{11, 22, 33}));
  int seen = 0;
  be->host_access(x.view(1), 4, false, [&](void* p) { seen = static_cast<int>(*static_cast<float*>(p)); });
  EXPECT_EQ(seen, 22);
}

TEST(CheckedCpuBackend, FreedMemoryIsReusedAndReadsBackZero) {
  auto be = tpbatch::make_cpu_backend({.checked = true});
  void* first = nullptr;
  {
    Buffer a = put(*be, std::vector<float>(3000, 7.0f));
    first = a.view().data;
  }
  Buffer b = be->alloc(3000, DType::F32);
  EXPECT_EQ(b.view().data, first);
  EXPECT_EQ(get(*be, b), std::vector<float>(3000, 0.0f));
}

}  // namespace
