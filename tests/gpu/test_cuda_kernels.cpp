// Each CUDA kernel against its CPU twin (make_cpu_backend(), or the loop it mirrors) on fresh
// random data: ||gpu - cpu|| / ||cpu|| < 1e-5 for fp32, < 1e-2 with bf16 weights. Every test skips
// on machines without a CUDA device, so the binary passes (as skipped) on CPU-only CI.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "kernels.h"

namespace tpbatch {
namespace {

using Vec = std::vector<float>;

double rel_err(const Vec& out, const Vec& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += (double(out[i]) - ref[i]) * (double(out[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

class CudaKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      cudaGetLastError();
      GTEST_SKIP() << "no CUDA device";
    }
    gpu_ = make_cuda_backend(0);
    cpu_ = make_cpu_backend();
    const unsigned seed = std::random_device{}();
    RecordProperty("seed", static_cast<int>(seed));
    std::printf("seed %u\n", seed);
    rng_.seed(seed);
  }
  Vec random(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> d(lo, hi);
    Vec v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }
  template <typename T>
  static std::vector<T> to_host(const DeviceArray<T>& d) {
    std::vector<T> h(d.size());
    d.to_host(h.data());
    return h;
  }

  std::unique_ptr<Backend> gpu_, cpu_;
  std::mt19937 rng_;
};

TEST_F(CudaKernels, MatmulNtMatchesCpu) {
  for (int64_t m : {1, 7, 64}) {
    const int64_t n = 129, k = 300;
    Vec x = random(m * k), w = random(n * k), ref(m * n);
    cpu_->matmul_nt(x.data(), w.data(), ref.data(), m, n, k);
    DeviceArray<float> dx(x.data(), x.size()), dw(w.data(), w.size()), dy(m * n);
    gpu_->matmul_nt(dx.data(), dw.data(), dy.data(), m, n, k);
    EXPECT_LT(rel_err(to_host(dy), ref), 1e-5) << "m=" << m;
  }
}

TEST_F(CudaKernels, RmsnormMatchesCpu) {
  const int64_t m = 5, n = 1000;
  Vec x = random(m * n, -3, 3), w = random(n), ref(m * n);
  cpu_->rmsnorm(x.data(), w.data(), ref.data(), m, n, 1e-5f);
  DeviceArray<float> dx(x.data(), x.size()), dw(w.data(), w.size()), out(m * n);
  gpu_->rmsnorm(dx.data(), dw.data(), out.data(), m, n, 1e-5f);
  EXPECT_LT(rel_err(to_host(out), ref), 1e-5);
}

TEST_F(CudaKernels, RmsnormWithBf16WeightsMatchesCpu) {
  const int64_t m = 3, n = 4096;
  Vec x = random(m * n), w = random(n), ref(m * n);
  cpu_->rmsnorm(x.data(), w.data(), ref.data(), m, n, 1e-6f);
  std::vector<__nv_bfloat16> wb(n);
  for (int64_t i = 0; i < n; ++i) wb[i] = __float2bfloat16(w[i]);
  DeviceArray<float> dx(x.data(), x.size()), out(m * n);
  DeviceArray<__nv_bfloat16> dw(wb.data(), n);
  kernels::rmsnorm(dx.data(), dw.data(), out.data(), m, n, 1e-6f, nullptr);
  EXPECT_LT(rel_err(to_host(out), ref), 1e-2);
}

TEST_F(CudaKernels, AddRmsnormMatchesAddThenRmsnorm) {
  const int64_t m = 4, n = 777;
  Vec x = random(m * n), r = random(m * n), w = random(n), ref(m * n);
  Vec xs = x;
  cpu_->add(xs.data(), r.data(), xs.size());
  cpu_->rmsnorm(xs.data(), w.data(), ref.data(), m, n, 1e-5f);
  DeviceArray<float> dx(x.data(), x.size()), dr(r.data(), r.size()), dw(w.data(), n), out(m * n);
  kernels::add_rmsnorm(dx.data(), dr.data(), dw.data(), out.data(), m, n, 1e-5f, nullptr);
  EXPECT_LT(rel_err(to_host(out), ref), 1e-5);
  EXPECT_LT(rel_err(to_host(dx), xs), 1e-6);  // the residual stream is updated in place
}

TEST_F(CudaKernels, RopeMatchesCpu) {
  const int64_t rows = 6, heads = 4, hd = 128, stride = heads * hd + 64;  // stride: rope on the q part of qkv
  Vec x = random(rows * stride), inv(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) inv[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / hd));
  std::vector<int32_t> pos(rows);
  std::uniform_int_distribution<int32_t> dp(0, 100000);
  for (auto& p : pos) p = dp(rng_);
  Vec ref = x;
  cpu_->rope(ref.data(), rows, stride, heads, hd, pos.data(), inv.data());
  DeviceArray<float> dx(x.data(), x.size()), dinv(inv.data(), inv.size());
  DeviceArray<int32_t> dpos(pos.data(), pos.size());
  gpu_->rope(dx.data(), rows, stride, heads, hd, dpos.data(), dinv.data());
  EXPECT_LT(rel_err(to_host(dx), ref), 1e-5);
}

TEST_F(CudaKernels, SiluMulMatchesCpu) {
  const int64_t m = 9, inter = 1000;
  Vec gu = random(m * 2 * inter, -6, 6), ref(m * inter);
  cpu_->silu_mul(gu.data(), ref.data(), m, inter);
  DeviceArray<float> dgu(gu.data(), gu.size()), out(m * inter);
  gpu_->silu_mul(dgu.data(), out.data(), m, inter);
  EXPECT_LT(rel_err(to_host(out), ref), 1e-5);
}

TEST_F(CudaKernels, AddMatchesCpu) {
  Vec x = random(100003), y = random(100003), ref = x;
  cpu_->add(ref.data(), y.data(), ref.size());
  DeviceArray<float> dx(x.data(), x.size()), dy(y.data(), y.size());
  gpu_->add(dx.data(), dy.data(), x.size());
  EXPECT_LT(rel_err(to_host(dx), ref), 1e-6);
}

TEST_F(CudaKernels, AddBiasMatchesCpu) {
  const int64_t m = 7, n = 333;
  Vec x = random(m * n), b = random(n), ref = x;
  cpu_->add_bias(ref.data(), b.data(), m, n);
  DeviceArray<float> dx(x.data(), x.size()), db(b.data(), n);
  gpu_->add_bias(dx.data(), db.data(), m, n);
  EXPECT_LT(rel_err(to_host(dx), ref), 1e-6);
}

TEST_F(CudaKernels, EmbeddingMasksIdsOutsideTheShard) {
  const int64_t v0 = 100, v1 = 200, dim = 96;
  Vec table = random((v1 - v0) * dim);
  std::vector<int32_t> ids = {100, 5, 199, 200, 150, 150, 0, 123};
  Vec ref(ids.size() * dim);
  cpu_->embedding(ids.data(), ids.size(), table.data(), v0, v1, dim, ref.data());
  DeviceArray<float> dt(table.data(), table.size()), out(ids.size() * dim);
  DeviceArray<int32_t> di(ids.data(), ids.size());
  gpu_->embedding(di.data(), ids.size(), dt.data(), v0, v1, dim, out.data());
  EXPECT_EQ(to_host(out), ref);  // a copy: exact

  std::vector<__nv_bfloat16> tb(table.size());
  for (size_t i = 0; i < table.size(); ++i) tb[i] = __float2bfloat16(table[i]);
  DeviceArray<__nv_bfloat16> dtb(tb.data(), tb.size());
  kernels::embedding(di.data(), ids.size(), dtb.data(), v0, v1, dim, out.data(), nullptr);
  EXPECT_LT(rel_err(to_host(out), ref), 1e-2);
}

TEST_F(CudaKernels, ConvertBf16AndFp16RoundTrip) {
  Vec x = random(10000, -100, 100);
  std::vector<__nv_bfloat16> xb(x.size());
  std::vector<__half> xh(x.size());
  for (size_t i = 0; i < x.size(); ++i) xb[i] = __float2bfloat16(x[i]), xh[i] = __float2half(x[i]);
  DeviceArray<float> dx(x.data(), x.size()), f(x.size());
  DeviceArray<__nv_bfloat16> b(x.size());
  DeviceArray<__half> h(x.size());
  kernels::convert(dx.data(), b.data(), x.size(), nullptr);
  kernels::convert(b.data(), f.data(), x.size(), nullptr);
  Vec fb = to_host(f);
  kernels::convert(dx.data(), h.data(), x.size(), nullptr);
  kernels::convert(h.data(), f.data(), x.size(), nullptr);
  Vec fh = to_host(f);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(fb[i], __bfloat162float(xb[i])) << i;  // same rounding as the host conversion
    ASSERT_EQ(fh[i], __half2float(xh[i])) << i;
  }
  EXPECT_LT(rel_err(fb, x), 1e-2);
}

// The CPU LM head's per-shard loop (ModelRunner::compute_logits), verbatim.
kernels::LogitStats cpu_logit_stats(const float* row, int64_t vn, int64_t v0, int32_t target) {
  kernels::LogitStats st{-std::numeric_limits<float>::infinity(), 0, 0.0f, std::numeric_limits<float>::quiet_NaN()};
  for (int64_t j = 0; j < vn; ++j)
    if (row[j] > st.max_logit) st.max_logit = row[j], st.argmax = static_cast<int32_t>(v0 + j);
  double se = 0.0;
  for (int64_t j = 0; j < vn; ++j) se += std::exp(static_cast<double>(row[j]) - st.max_logit);
  st.sum_exp = static_cast<float>(se);
  if (target >= v0 && target < v0 + vn) st.target_logit = row[target - v0];
  return st;
}

TEST_F(CudaKernels, LogitStatsMatchCpuIncludingLowestIdTies) {
  const int64_t rows = 5, vn = 32003, v0 = 64000;
  Vec logits = random(rows * vn, -10, 10);
  logits[1 * vn + 40] = logits[1 * vn + 30000] = 50.0f;  // a tie: the lower id wins
  logits[2 * vn + 7] = logits[2 * vn + 8] = 60.0f;
  std::vector<int32_t> targets = {int32_t(v0 + 3), 5, int32_t(v0 + vn - 1), int32_t(v0 + vn), int32_t(v0)};
  DeviceArray<float> dl(logits.data(), logits.size());
  DeviceArray<int32_t> dt(targets.data(), targets.size());
  DeviceArray<kernels::LogitStats> ds(rows);
  kernels::logit_stats(dl.data(), rows, vn, v0, dt.data(), ds.data(), nullptr);
  auto got = to_host(ds);
  for (int64_t r = 0; r < rows; ++r) {
    const auto ref = cpu_logit_stats(logits.data() + r * vn, vn, v0, targets[r]);
    EXPECT_EQ(got[r].max_logit, ref.max_logit) << r;
    EXPECT_EQ(got[r].argmax, ref.argmax) << r;
    EXPECT_NEAR(got[r].sum_exp, ref.sum_exp, 1e-5 * ref.sum_exp) << r;
    if (std::isnan(ref.target_logit))
      EXPECT_TRUE(std::isnan(got[r].target_logit)) << r;
    else
      EXPECT_EQ(got[r].target_logit, ref.target_logit) << r;
  }
  EXPECT_EQ(got[1].argmax, v0 + 40);
  EXPECT_EQ(got[2].argmax, v0 + 7);
}

// A step with a prefill chunk continuing a cached prefix, a fresh prefill and two decode rows,
// GQA (8 q heads over 2 kv heads), shuffled block tables; with and without a sliding window.
void check_paged_attention(CudaKernels& t, Backend& cpu, Backend& gpu, std::mt19937& rng, int64_t window) {
  KvLayout kv;
  kv.num_blocks = 64, kv.kv_heads = 2, kv.block_size = 16, kv.head_dim = 64, kv.window = window;
  const int64_t q_heads = 8, qd = q_heads * kv.head_dim, kvd = kv.kv_heads * kv.head_dim;
  std::vector<int32_t> perm(kv.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  struct S { int64_t rows, pos; };
  const std::vector<S> shape = {{37, 21}, {50, 0}, {1, 200}, {1, 5}};
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  int64_t row = 0, next_block = 0;
  for (const S& s : shape) {
    const int64_t blocks = (s.pos + s.rows + kv.block_size - 1) / kv.block_size;
    tables.emplace_back(perm.begin() + next_block, perm.begin() + next_block + blocks);
    next_block += blocks;
    seqs.push_back({row, s.rows, s.pos, nullptr, blocks});
    row += s.rows;
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i].blocks = tables[i].data();
  std::uniform_real_distribution<float> d(-2, 2);
  auto random = [&](size_t n) { Vec v(n); for (auto& x : v) x = d(rng); return v; };
  Vec q = random(row * qd), k = random(row * kvd), v = random(row * kvd);
  Vec kc = random(kv.floats_per_layer()), vc = random(kv.floats_per_layer());  // earlier positions: cached
  Vec out_ref(row * qd), kc_ref = kc, vc_ref = vc;
  cpu.paged_attention(q.data(), qd, k.data(), v.data(), kvd, kc_ref.data(), vc_ref.data(), kv, q_heads, seqs.data(),
                      seqs.size(), out_ref.data());
  DeviceArray<float> dq(q.data(), q.size()), dk(k.data(), k.size()), dv(v.data(), v.size());
  DeviceArray<float> dkc(kc.data(), kc.size()), dvc(vc.data(), vc.size()), dout(row * qd);
  gpu.paged_attention(dq.data(), qd, dk.data(), dv.data(), kvd, dkc.data(), dvc.data(), kv, q_heads, seqs.data(),
                      seqs.size(), dout.data());
  Vec out(row * qd);
  dout.to_host(out.data());
  dkc.to_host(kc.data());
  dvc.to_host(vc.data());
  EXPECT_EQ(kc, kc_ref) << "window " << window;
  EXPECT_EQ(vc, vc_ref) << "window " << window;
  EXPECT_LT(rel_err(out, out_ref), 1e-5) << "window " << window;
  (void)t;
}

TEST_F(CudaKernels, PagedAttentionMatchesCpu) { check_paged_attention(*this, *cpu_, *gpu_, rng_, 0); }

TEST_F(CudaKernels, PagedAttentionWithSlidingWindowMatchesCpu) {
  check_paged_attention(*this, *cpu_, *gpu_, rng_, 24);
}

}  // namespace
}  // namespace tpbatch
