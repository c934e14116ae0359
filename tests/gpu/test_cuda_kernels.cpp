// Every CUDA backend operation against its CPU twin: the same op through make_cpu_backend() (F32
// activations) and make_cuda_backend(0) (BF16 activations) on the same inputs. Inputs are
// bf16-exact (rounded to bf16 and widened back) so both backends start from identical values;
// the outputs then differ only by fp32 summation order and the GPU's bf16 output rounding, so
// the tolerance is a relative L2 error of 1e-2 (bf16 has 8 significant bits: ~4e-3 a value).
// KV cache appends, gathers, copies and argmaxes are compared exactly. Every test skips on
// machines without a CUDA device, so the binary passes (as skipped) on CPU-only CI.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "cuda_vs_cpu.h"
#include "kernels.h"
#include "model/run_dtypes.h"

namespace tpbatch {
namespace {

using namespace gpu_test;  // the shared fixture and helpers

TEST_F(CudaVsCpu, BackendBasics) {
  EXPECT_EQ(gpu_->activation_dtype(), DType::BF16);
  EXPECT_EQ(run_dtypes(JobSpec{}, [] { return DType::F32; }, true).activations, gpu_->activation_dtype());
  EXPECT_GT(gpu_->memory_available(), size_t(1) << 20);
  Buffer z = gpu_->alloc(1000, DType::F32);
  for (float v : get(*gpu_, z)) ASSERT_EQ(v, 0.0f);  // zero-filled
  // Upload/download round trip larger than one upload chunk, at an offset.
  std::vector<int32_t> big((size_t(40) << 20) / 4);
  std::iota(big.begin(), big.end(), 7);
  Buffer b = gpu_->alloc(big.size() + 16, DType::I32);
  gpu_->upload(b.view(16), big.data(), big.size() * 4);
  std::vector<int32_t> back(big.size());
  gpu_->download(b.view(16), back.data(), back.size() * 4);
  EXPECT_EQ(back, big);
  // host_access reads and writes back.
  gpu_->host_access(b.view(16), 64, true, [](void* p) { static_cast<int32_t*>(p)[3] = -5; });
  int32_t v = 0;
  gpu_->download(b.view(19), &v, 4);
  EXPECT_EQ(v, -5);
}

TEST_F(CudaVsCpu, MatmulNtForEveryWeightDtypeMatchesCpu) {
  for (DType wt : {DType::BF16, DType::F16, DType::F32})
    for (DType out : {act(), DType::F32})
      for (int64_t m : {1, 7, 64}) {
        const int64_t n = 129, k = 300;
        Vec x = random(m * k), w = random(n * k, -1, 1, wt == DType::F16 ? DType::F16 : DType::BF16);
        Buffer cx = put(*cpu_, x, DType::F32), cw = put(*cpu_, w, wt), cy = cpu_->alloc(m * n, DType::F32);
        Buffer gx = put(*gpu_, x, act()), gw = put(*gpu_, w, wt), gy = gpu_->alloc(m * n, out);
        cpu_->matmul_nt(cx.view(), cw.view(), cy.view(), m, n, k);
        gpu_->matmul_nt(gx.view(), gw.view(), gy.view(), m, n, k);
        EXPECT_LT(rel(get(*gpu_, gy), get(*cpu_, cy)), 1e-2)
            << "weights " << dtype_name(wt) << " out " << dtype_name(out) << " m=" << m;
      }
}

TEST_F(CudaVsCpu, RmsnormAndFusedAddRmsnormMatchCpu) {
  for (int64_t n : {4096, 100}) {  // the 16-byte-pack path and the scalar one
    const int64_t m = 5;
    Vec x = random(m * n, -3, 3), r = random(m * n, -3, 3), w = random(n, 0.5, 1.5, DType::F32);
    auto [cx, gx] = both(x);
    auto [cr, gr] = both(r);
    auto [co, go] = both_zero(m * n);
    Buffer cw = put(*cpu_, w, DType::F32), gw = put(*gpu_, w, DType::F32);
    cpu_->rmsnorm(cx.view(), cw.view(), co.view(), m, n, 1e-5f);
    gpu_->rmsnorm(gx.view(), gw.view(), go.view(), m, n, 1e-5f);
    EXPECT_LT(rel(get(*gpu_, go), get(*cpu_, co)), 1e-2) << "rmsnorm n=" << n;
    cpu_->add_rmsnorm(cx.view(), cr.view(), cw.view(), co.view(), m, n, 1e-5f);
    gpu_->add_rmsnorm(gx.view(), gr.view(), gw.view(), go.view(), m, n, 1e-5f);
    EXPECT_LT(rel(get(*gpu_, gx), get(*cpu_, cx)), 1e-2) << "residual sum n=" << n;
    EXPECT_LT(rel(get(*gpu_, go), get(*cpu_, co)), 1e-2) << "add_rmsnorm n=" << n;
  }
}

TEST_F(CudaVsCpu, ElementwiseOpsMatchCpu) {
  for (int64_t n : {4096, 77}) {
    const int64_t m = 3;
    Vec x = random(m * n), y = random(m * n), bias = random(n, -1, 1, DType::F32);
    auto [cx, gx] = both(x);
    auto [cy, gy] = both(y);
    cpu_->add(cx.view(), cy.view(), m * n);
    gpu_->add(gx.view(), gy.view(), m * n);
    EXPECT_LT(rel(get(*gpu_, gx), get(*cpu_, cx)), 1e-2) << "add n=" << n;
    Buffer cb = put(*cpu_, bias, DType::F32), gb = put(*gpu_, bias, DType::F32);
    cpu_->add_bias(cx.view(), cb.view(), m, n);
    gpu_->add_bias(gx.view(), gb.view(), m, n);
    EXPECT_LT(rel(get(*gpu_, gx), get(*cpu_, cx)), 1e-2) << "add_bias n=" << n;
    // silu_mul over [gate | up] rows of 2n
    Vec gu = random(m * 2 * n, -4, 4);
    auto [cg, gg] = both(gu);
    auto [co, go] = both_zero(m * n);
    cpu_->silu_mul(cg.view(), co.view(), m, n);
    gpu_->silu_mul(gg.view(), go.view(), m, n);
    EXPECT_LT(rel(get(*gpu_, go), get(*cpu_, co)), 1e-2) << "silu_mul n=" << n;
  }
}

TEST_F(CudaVsCpu, FamilyOpsMatchCpu) {
  // Per-head RMSNorm on the q part of fused qkv rows (Qwen3 / Gemma 3).
  for (int64_t hd : {64, 128, 256}) {
    const int64_t rows = 5, heads = 6, stride = heads * hd + 2 * hd;
    Vec x = random(rows * stride, -3, 3), w = random(hd, 0.5, 1.5, DType::F32);
    auto [cx, gx] = both(x);
    Buffer cw = put(*cpu_, w, DType::F32), gw = put(*gpu_, w, DType::F32);
    cpu_->rmsnorm_heads(cx.view(), rows, stride, heads, hd, cw.view(), 1e-6f);
    gpu_->rmsnorm_heads(gx.view(), rows, stride, heads, hd, gw.view(), 1e-6f);
    EXPECT_LT(rel(get(*gpu_, gx), get(*cpu_, cx)), 1e-2) << "rmsnorm_heads hd " << hd;
  }
  for (int64_t n : {4096, 77}) {
    const int64_t m = 3;
    Vec gu = random(m * 2 * n, -4, 4);
    auto [cg, gg] = both(gu);
    auto [co, go] = both_zero(m * n);
    cpu_->gelu_tanh_mul(cg.view(), co.view(), m, n);
    gpu_->gelu_tanh_mul(gg.view(), go.view(), m, n);
    EXPECT_LT(rel(get(*gpu_, go), get(*cpu_, co)), 1e-2) << "gelu_tanh_mul n=" << n;
    cpu_->scale(cg.view(), m * 2 * n, 8.0f);
    gpu_->scale(gg.view(), m * 2 * n, 8.0f);
    EXPECT_LT(rel(get(*gpu_, gg), get(*cpu_, cg)), 1e-2) << "scale n=" << n;
  }
  Vec logits = random(1000, -100, 100, DType::F32);  // soft-capping works on F32 logits
  Buffer cl = put(*cpu_, logits, DType::F32), gl = put(*gpu_, logits, DType::F32);
  cpu_->softcap(cl.view(), logits.size(), 30.0f);
  gpu_->softcap(gl.view(), logits.size(), 30.0f);
  EXPECT_LT(rel(get(*gpu_, gl), get(*cpu_, cl)), 1e-5) << "softcap";
}

// Mixture of experts: each token's k expert-output rows, weighted and summed (kernels/weighted_row_sum.cu).
TEST_F(CudaVsCpu, WeightedRowSumMatchesCpu) {
  const int64_t slots = 12, k = 2, width = 300;  // 6 tokens, top-2
  Vec src = random(slots * width, -2, 2);
  auto [cs, gs] = both(src);
  auto [co, go] = both_zero((slots / k) * width);
  const std::vector<int64_t> rows = {3, 0, 7, 1, 11, 2, 4, 5, 10, 6, 9, 8};
  const std::vector<float> weights = {0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f, 0.6f, 0.4f, 0.2f, 0.8f, 1.0f, 0.0f};
  cpu_->weighted_row_sum(cs.view(), rows, weights, k, width, co.view());
  gpu_->weighted_row_sum(gs.view(), rows, weights, k, width, go.view());
  EXPECT_LT(rel(get(*gpu_, go), get(*cpu_, co)), 1e-2) << "weighted_row_sum";
}

TEST_F(CudaVsCpu, RopeAtTheStepsPositionsMatchesCpu) {
  for (int64_t hd : {64, 128, 256}) {
    const int64_t rows = 6, heads = 4, stride = heads * hd + 3 * hd;  // q of a fused qkv row
    std::vector<int32_t> tokens(rows, 0), pos = {0, 1, 17, 1000, 4095, 32767};
    StepBatch s;
    s.tokens = tokens;
    s.positions = pos;
    begin_both(s);
    Vec x = random(rows * stride, -2, 2), inv(hd / 2);
    for (int64_t i = 0; i < hd / 2; ++i) inv[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / hd));
    auto [cx, gx] = both(x);
    Buffer ci = put(*cpu_, inv, DType::F32), gi = put(*gpu_, inv, DType::F32);
    cpu_->rope(cx.view(), stride, heads, hd, ci.view());
    gpu_->rope(gx.view(), stride, heads, hd, gi.view());
    EXPECT_LT(rel(get(*gpu_, gx), get(*cpu_, cx)), 1e-2) << "head_dim " << hd;
  }
}

// Phi-3 longrope: rows of one step turn by different tables (short and long factors).
TEST_F(CudaVsCpu, RopeWithAFrequencyTablePerRowMatchesCpu) {
  const int64_t hd = 96, rows = 5, heads = 3, stride = heads * hd;
  std::vector<int32_t> tokens(rows, 0), pos = {0, 40, 40, 4096, 100000}, tables = {1, 0, 1, 1, 0};
  StepBatch s;
  s.tokens = tokens;
  s.positions = pos;
  s.rope_tables = tables;
  begin_both(s);
  Vec x = random(rows * stride, -2, 2), inv(hd);  // two tables of hd / 2
  for (int64_t i = 0; i < hd / 2; ++i) {
    inv[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / hd));
    inv[hd / 2 + i] = inv[i] / static_cast<float>(1.0 + i);
  }
  auto [cx, gx] = both(x);
  Buffer ci = put(*cpu_, inv, DType::F32), gi = put(*gpu_, inv, DType::F32);
  cpu_->rope(cx.view(), stride, heads, hd, ci.view());
  gpu_->rope(gx.view(), stride, heads, hd, gi.view());
  // The CPU honours the tables (tests/unit: RopeTurnsEachRowByItsTable); a kernel that read the
  // first table for every row would be off by whole radians on rows 2 and 3.
  EXPECT_LT(rel(get(*gpu_, gx), get(*cpu_, cx)), 1e-2);
}

TEST_F(CudaVsCpu, EmbeddingOfAVocabShardMatchesCpu) {
  const int64_t v0 = 100, v1 = 300, dim = 96;
  std::vector<int32_t> ids = {100, 299, 5, 300, 150, 1000, 123};
  std::vector<int32_t> pos(ids.size(), 0);
  StepBatch s;
  s.tokens = ids;
  s.positions = pos;
  begin_both(s);
  for (DType tt : {DType::BF16, DType::F32, DType::F16}) {
    Vec table = random((v1 - v0) * dim, -1, 1, tt == DType::F16 ? DType::F16 : DType::BF16);
    Buffer ct = put(*cpu_, table, tt), gt = put(*gpu_, table, tt);
    auto [co, go] = both_zero(ids.size() * dim);
    cpu_->embedding(ct.view(), v0, v1, dim, co.view());
    gpu_->embedding(gt.view(), v0, v1, dim, go.view());
    const Vec got = get(*gpu_, go), ref = get(*cpu_, co);
    EXPECT_EQ(got, ref) << dtype_name(tt);  // bf16-exact values copy exactly
    rel(got, ref);
  }
}

TEST_F(CudaVsCpu, GatherLogitRowsAndCopyRowsMatchCpu) {
  const int64_t rows = 9, dim = 40;
  std::vector<int32_t> tokens(rows, 0), pos(rows, 0), targets = {-1, 3, 7, -1};
  std::vector<int64_t> lrows = {8, 0, 3, 4};
  StepBatch s;
  s.tokens = tokens;
  s.positions = pos;
  s.logit_rows = lrows;
  s.logit_targets = targets;
  begin_both(s);
  Vec x = random(rows * dim);
  auto [cx, gx] = both(x);
  auto [co, go] = both_zero(3 * dim);
  cpu_->gather_logit_rows(cx.view(), dim, 1, 3, co.view());
  gpu_->gather_logit_rows(gx.view(), dim, 1, 3, go.view());
  const Vec gathered = get(*gpu_, go), gathered_ref = get(*cpu_, co);
  EXPECT_EQ(gathered, gathered_ref);
  rel(gathered, gathered_ref);
  // copy_rows: runs and single rows, a narrower width and different strides.
  std::vector<int64_t> pick = {2, 3, 4, 7, 0};
  auto [cd, gd] = both_zero(pick.size() * 50);
  cpu_->copy_rows(cx.view(), dim, pick, 30, cd.view(), 50);
  gpu_->copy_rows(gx.view(), dim, pick, 30, gd.view(), 50);
  const Vec copied = get(*gpu_, gd), copied_ref = get(*cpu_, cd);
  EXPECT_EQ(copied, copied_ref);
  rel(copied, copied_ref);
}

TEST_F(CudaVsCpu, LogitStatsMatchCpuIncludingLowestIdTies) {
  const int64_t rows = 5, vn = 32003, v0 = 64000;
  std::vector<int32_t> tokens(rows, 0), pos(rows, 0);
  std::vector<int64_t> lrows = {0, 1, 2, 3, 4};
  std::vector<int32_t> targets = {int32_t(v0 + 3), 5, int32_t(v0 + vn - 1), int32_t(v0 + vn), int32_t(v0)};
  StepBatch s;
  s.tokens = tokens;
  s.positions = pos;
  s.logit_rows = lrows;
  s.logit_targets = targets;
  begin_both(s);
  Vec logits = random(rows * vn, -10, 10, DType::F32);
  logits[1 * vn + 40] = logits[1 * vn + 30000] = 50.0f;  // a tie: the lower id wins
  logits[2 * vn + 7] = logits[2 * vn + 8] = 60.0f;
  Buffer cl = put(*cpu_, logits, DType::F32), gl = put(*gpu_, logits, DType::F32);
  Buffer cs = cpu_->alloc(4 * rows, DType::F32), gs = gpu_->alloc(4 * rows, DType::F32);
  cpu_->logit_stats(cl.view(), rows, vn, v0, 0, cs.view());
  gpu_->logit_stats(gl.view(), rows, vn, v0, 0, gs.view());
  std::vector<LogitStats> ref(rows), got(rows);
  cpu_->download(cs.view(), ref.data(), rows * sizeof(LogitStats));
  gpu_->download(gs.view(), got.data(), rows * sizeof(LogitStats));
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(got[r].max_logit, ref[r].max_logit) << r;
    EXPECT_EQ(got[r].argmax, ref[r].argmax) << r;
    EXPECT_LT(rel({got[r].sum_exp}, {ref[r].sum_exp}), 1e-5) << r;
    if (std::isnan(ref[r].target_logit))
      EXPECT_TRUE(std::isnan(got[r].target_logit)) << r;
    else
      EXPECT_EQ(got[r].target_logit, ref[r].target_logit) << r;
  }
  EXPECT_EQ(got[1].argmax, v0 + 40);
  EXPECT_EQ(got[2].argmax, v0 + 7);
}

// logit_stats split over blocks: per row the CPU and GPU stats of `logits` ([rows][vn], targets
// global ids) must agree, max / argmax / target exactly, the sum to 1e-5 (both NaN or both 0 too).
void check_logit_stats(CudaVsCpu& t, Backend& cpu, Backend& gpu, const Vec& logits, int64_t vn, int64_t v0,
                       const std::vector<int32_t>& targets, const std::string& name,
                       std::vector<LogitStats>* got_out = nullptr) {
  const int64_t rows = static_cast<int64_t>(targets.size());
  std::vector<int32_t> tokens(rows, 0), pos(rows, 0);
  std::vector<int64_t> lrows(rows);
  std::iota(lrows.begin(), lrows.end(), 0);
  StepBatch s;
  s.tokens = tokens;
  s.positions = pos;
  s.logit_rows = lrows;
  s.logit_targets = targets;
  cpu.begin_step(s);
  gpu.begin_step(s);
  Buffer cl = put(cpu, logits, DType::F32), gl = put(gpu, logits, DType::F32);
  Buffer cs = cpu.alloc(4 * rows, DType::F32), gs = gpu.alloc(4 * rows, DType::F32);
  cpu.logit_stats(cl.view(), rows, vn, v0, 0, cs.view());
  gpu.logit_stats(gl.view(), rows, vn, v0, 0, gs.view());
  std::vector<LogitStats> ref(rows), got(rows);
  cpu.download(cs.view(), ref.data(), rows * sizeof(LogitStats));
  gpu.download(gs.view(), got.data(), rows * sizeof(LogitStats));
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(got[r].max_logit, ref[r].max_logit) << name << " row " << r;
    EXPECT_EQ(got[r].argmax, ref[r].argmax) << name << " row " << r;
    if (std::isnan(ref[r].sum_exp) || ref[r].sum_exp == 0.0f)
      EXPECT_TRUE(std::isnan(ref[r].sum_exp) ? std::isnan(got[r].sum_exp) : got[r].sum_exp == 0.0f)
          << name << " row " << r << ": sum " << got[r].sum_exp << " vs " << ref[r].sum_exp;
    else
      EXPECT_LT(t.rel({got[r].sum_exp}, {ref[r].sum_exp}), 1e-5) << name << " row " << r;
    if (std::isnan(ref[r].target_logit))
      EXPECT_TRUE(std::isnan(got[r].target_logit)) << name << " row " << r;
    else
      EXPECT_EQ(got[r].target_logit, ref[r].target_logit) << name << " row " << r;
  }
  if (got_out) *got_out = got;
}

// The split the CUDA backend uses on device 0 for `rows` rows of `vn` logits.
kernels::LogitStatsGrid grid_on(int64_t rows, int64_t vn) {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  return kernels::logit_stats_grid(rows, vn, sms);
}

// Host arithmetic only: how rows are cut into blocks.
TEST(LogitStatsGrid, FewRowsAtALargeVocabFillTheGpuManyRowsAreNotSplit) {
  const kernels::LogitStatsGrid one = kernels::logit_stats_grid(1, 131072, 132);
  EXPECT_GE(one.splits, 128);  // ~one block per SM for a single row
  EXPECT_EQ(one.span % 1024, 0);
  EXPECT_GE(one.splits * one.span, 131072);
  EXPECT_LT((one.splits - 1) * one.span, 131072);  // no empty block
  const kernels::LogitStatsGrid eight = kernels::logit_stats_grid(8, 131072, 132);
  EXPECT_GE(8 * eight.splits, 2 * 132);
  EXPECT_EQ(kernels::logit_stats_grid(128, 131072, 132).splits, 5);   // 640 blocks: ~4 per SM
  EXPECT_EQ(kernels::logit_stats_grid(1024, 131072, 132).splits, 1);  // plenty of rows: one block each
  EXPECT_EQ(kernels::logit_stats_grid(1, 1, 132).splits, 1);          // no block under 1024 logits
  EXPECT_EQ(kernels::logit_stats_grid(1, 3000, 132).splits, 3);
  EXPECT_EQ(kernels::logit_stats_scratch_bytes(4, kernels::logit_stats_grid(4, 3000, 132)), size_t(4 * 3 * 16));
}

TEST_F(CudaVsCpu, LogitStatsTiesAcrossBlockBoundariesPickTheLowestId) {
  const int64_t vn = 4 * 1024 + 5, v0 = 1000;  // 5 blocks a row on the emulated H200
  const kernels::LogitStatsGrid g = grid_on(3, vn);
  ASSERT_GE(g.splits, 3) << "the shape must span several blocks";
  Vec logits = random(3 * vn, -10, 10, DType::F32);
  const int64_t b = g.span;  // first logit of block 1
  logits[0 * vn + b - 1] = logits[0 * vn + b] = 30.0f;           // last of block 0 == first of block 1
  logits[1 * vn + 2 * b + 7] = logits[1 * vn + b + 3] = 30.0f;   // the later block holds the higher id
  logits[1 * vn + vn - 1] = 30.0f;                               // and the last block too
  logits[2 * vn + vn - 1] = logits[2 * vn + vn - 2] = 30.0f;     // inside the short last block
  std::vector<LogitStats> got;
  check_logit_stats(*this, *cpu_, *gpu_, logits, vn, v0, {-1, -1, -1}, "ties", &got);
  EXPECT_EQ(got[0].argmax, v0 + b - 1);
  EXPECT_EQ(got[1].argmax, v0 + b + 3);
  EXPECT_EQ(got[2].argmax, v0 + vn - 2);
}

// Shards of any size: rows not 16-byte aligned (vn % 4 != 0), shorter than a block's span, one element.
TEST_F(CudaVsCpu, LogitStatsOfShardsNotAMultipleOfTheBlockSpanOrOfFourMatchCpu) {
  for (int64_t vn : {1, 2, 3, 5, 1023, 1025, 2049, 3001}) {
    const int64_t rows = 3, v0 = 7;
    Vec logits = random(rows * vn, -5, 5, DType::F32);
    check_logit_stats(*this, *cpu_, *gpu_, logits, vn, v0, {int32_t(v0), int32_t(v0 + vn - 1), 3},
                      "vn " + std::to_string(vn));
  }
}

TEST_F(CudaVsCpu, LogitStatsFindTheTargetInEveryBlock) {
  const int64_t vn = 5 * 1024 + 3, v0 = 50000;
  const kernels::LogitStatsGrid g = grid_on(1, vn);
  ASSERT_GE(g.splits, 5);
  std::vector<int32_t> targets;
  for (int64_t b = 0; b < g.splits; ++b) {
    targets.push_back(static_cast<int32_t>(v0 + b * g.span));                           // a block's first logit
    targets.push_back(static_cast<int32_t>(v0 + std::min(vn, (b + 1) * g.span) - 1));  // and its last
  }
  targets.push_back(static_cast<int32_t>(v0 - 1));  // just outside the shard: NaN
  targets.push_back(static_cast<int32_t>(v0 + vn));
  Vec logits;
  for (size_t r = 0; r < targets.size(); ++r) {
    Vec row = random(vn, -3, 3, DType::F32);
    logits.insert(logits.end(), row.begin(), row.end());
  }
  std::vector<LogitStats> got;
  check_logit_stats(*this, *cpu_, *gpu_, logits, vn, v0, targets, "targets", &got);
  for (size_t r = 0; r + 2 < targets.size(); ++r) EXPECT_EQ(got[r].target_logit, logits[r * vn + targets[r] - v0]) << r;
  EXPECT_TRUE(std::isnan(got[targets.size() - 2].target_logit));
  EXPECT_TRUE(std::isnan(got[targets.size() - 1].target_logit));
}

// -inf logits (masked vocabulary) add nothing; a row of only -inf has max -inf, argmax 0 and sum 0
// (a NaN there would poison the ranks' merge); very negative logits still count.
TEST_F(CudaVsCpu, LogitStatsOfNegativeInfinityAndVeryNegativeLogitsMatchCpu) {
  const float inf = std::numeric_limits<float>::infinity(), lowest = std::numeric_limits<float>::lowest();
  const int64_t vn = 3 * 1024 + 1, rows = 5;
  Vec logits(rows * vn, -inf);                                         // row 0: all -inf
  logits[1 * vn + 2500] = -3.0f;                                       // row 1: one finite logit in block 2
  for (int64_t j = 0; j < vn; ++j) logits[2 * vn + j] = lowest;        // row 2: all -FLT_MAX: a tie of vn
  for (int64_t j = 0; j < vn; ++j) logits[3 * vn + j] = j % 2 ? -1e30f : -inf;  // row 3: -1e30 between -infs
  for (int64_t j = 0; j < vn; ++j) logits[4 * vn + j] = j == 1500 ? 0.0f : -1e30f;  // row 4: -1e30 adds exp(-1e30) = 0
  std::vector<LogitStats> got;
  check_logit_stats(*this, *cpu_, *gpu_, logits, vn, 0, {0, 2500, 9, 1, 2}, "-inf", &got);
  EXPECT_EQ(got[0].max_logit, -inf);
  EXPECT_EQ(got[0].argmax, 0);
  EXPECT_EQ(got[0].sum_exp, 0.0f);
  EXPECT_EQ(got[1].argmax, 2500);
  EXPECT_EQ(got[1].sum_exp, 1.0f);
  EXPECT_EQ(got[2].argmax, 0);
  EXPECT_EQ(got[2].sum_exp, float(vn));
  EXPECT_EQ(got[3].argmax, 1);
  EXPECT_EQ(got[3].sum_exp, float(vn / 2));
  EXPECT_EQ(got[4].sum_exp, 1.0f);
}

TEST_F(CudaVsCpu, LogitStatsOfRowsOfOneLogitMatchCpu) {
  const Vec logits = {2.5f, -1.0f, -std::numeric_limits<float>::infinity()};
  std::vector<LogitStats> got;
  check_logit_stats(*this, *cpu_, *gpu_, logits, 1, 40, {40, 41, 40}, "one logit", &got);
  EXPECT_EQ(got[0].argmax, 40);
  EXPECT_EQ(got[0].sum_exp, 1.0f);
  EXPECT_EQ(got[0].target_logit, 2.5f);
  EXPECT_EQ(got[2].argmax, 0);
}

// Constrained rows on a shard of 200 logits (3 words, the last partial): whole words in, whole
// words out and single bits; both backends leave allowed logits untouched and set the rest to -inf.
TEST_F(CudaVsCpu, MaskLogitsSetsExactlyTheClearBitsToMinusInfinity) {
  const int64_t rows = 3, vn = 200, words = 4;  // ceil(200 / 64)
  std::vector<uint64_t> bits = {~uint64_t{0}, 0, uint64_t{1} << 7 | 1u, 0,  // row 0
                                0x8000000000000001u, ~uint64_t{0}, 0, uint64_t{1} << 7,
                                0, 0, 0, 0};  // row 2: nothing allowed
  const Vec logits = random(rows * vn, -5, 5, DType::F32);
  Buffer cl = put(*cpu_, logits, DType::F32), gl = put(*gpu_, logits, DType::F32);
  Buffer cb = cpu_->alloc(bits.size(), DType::I64), gb = gpu_->alloc(bits.size(), DType::I64);
  cpu_->upload(cb.view(), bits.data(), bits.size() * 8);
  gpu_->upload(gb.view(), bits.data(), bits.size() * 8);
  cpu_->mask_logits(cl.view(), rows, vn, cb.view());
  gpu_->mask_logits(gl.view(), rows, vn, gb.view());
  const Vec got = get(*gpu_, gl), want = get(*cpu_, cl);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < vn; ++j) {
      const size_t c = static_cast<size_t>(i * vn + j);
      const bool allowed = (bits[i * words + j / 64] >> (j % 64)) & 1u;
      EXPECT_EQ(want[c], allowed ? logits[c] : -std::numeric_limits<float>::infinity()) << i << " " << j;
      EXPECT_EQ(got[c], want[c]) << i << " " << j;
    }
}

// More rows than one launch's grid holds (65535): the last rows are masked too.
TEST_F(CudaVsCpu, MaskLogitsOfMoreRowsThanOneGridHolds) {
  const int64_t rows = 65537, vn = 2;
  std::vector<uint64_t> bits(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) bits[i] = uint64_t(1) << (i % 2);  // row i allows column i % 2
  Buffer gl = put(*gpu_, Vec(static_cast<size_t>(rows * vn), 1.0f), DType::F32);
  Buffer gb = gpu_->alloc(bits.size(), DType::I64);
  gpu_->upload(gb.view(), bits.data(), bits.size() * 8);
  gpu_->mask_logits(gl.view(), rows, vn, gb.view());
  const Vec got = get(*gpu_, gl);
  for (int64_t i : {int64_t{0}, int64_t{1}, int64_t{65534}, int64_t{65535}, int64_t{65536}})
    for (int64_t j = 0; j < vn; ++j)
      EXPECT_EQ(got[static_cast<size_t>(i * vn + j)], j == i % 2 ? 1.0f : -std::numeric_limits<float>::infinity())
          << i << " " << j;
}

// ---- paged attention ------------------------------------------------------------------------

// How the attention grid is cut (host arithmetic only: runs without a GPU too).
TEST(AttentionGrid, TilesHoldUpToSixteenQueriesOfOneKvHead) {
  const int64_t tiles[kernels::kTileShapes] = {100, 50, 25, 13, 7};
  struct Want { int64_t group; int shape; int64_t heads, chunks; };
  for (const Want& w : std::vector<Want>{{1, 4, 1, 1}, {4, 2, 4, 1}, {7, 1, 7, 1}, {8, 1, 8, 1}, {16, 0, 16, 1},
                                         {32, 0, 16, 2}}) {
    const kernels::AttentionGrid g = kernels::attention_grid(w.group, 8, tiles, 100000, 132);
    EXPECT_EQ(g.tile_shape, w.shape) << "group " << w.group;
    EXPECT_EQ(g.heads_per_tile, w.heads) << "group " << w.group;
    EXPECT_EQ(g.head_chunks, w.chunks) << "group " << w.group;
    EXPECT_EQ(g.tiles, tiles[w.shape]) << "group " << w.group;
    EXPECT_LE((int64_t(1) << g.tile_shape) * g.heads_per_tile, kernels::kMaxTileQueries);
  }
}

TEST(AttentionGrid, BatchOneDecodeIsSplitOverTheContextLargeStepsAreNot) {
  const int64_t one[kernels::kTileShapes] = {1, 1, 1, 1, 1};
  const kernels::AttentionGrid decode = kernels::attention_grid(4, 8, one, 4096, 132);  // 8 blocks unsplit
  EXPECT_EQ(decode.splits, 33);  // ~2 blocks per SM
  EXPECT_EQ(kernels::attention_grid(4, 8, one, 20, 132).splits, 1);  // too short to split
  EXPECT_EQ(kernels::attention_grid(4, 8, one, 1 << 20, 132).splits, 33);
  const int64_t many[kernels::kTileShapes] = {4096, 2048, 1024, 512, 256};
  EXPECT_EQ(kernels::attention_grid(4, 8, many, 4096, 132).splits, 1);
  EXPECT_EQ(kernels::attention_scratch_floats(1, 32, 128, 1), 0u);
  EXPECT_EQ(kernels::attention_scratch_floats(1, 32, 128, 33), size_t(32 * 33 * 130));
}


struct SeqShape {
  int64_t rows, pos;  // tokens of the step, position of the first
};

struct AttentionCase {
  int64_t head_dim, q_heads, kv_heads, window;
  DType kv_dtype;
  std::vector<SeqShape> seqs;
  std::string name;
  float scale = 0.0f, softcap = 0.0f;
  int64_t block_size = 16;  // positions per cache page
};

// One step of the given sequences (block tables shuffled over the cache, earlier positions
// random "cached" values) through both backends: the caches after the append must be equal
// bit for bit, the outputs within the bf16 tolerance.
void check_attention(CudaVsCpu& t, Backend& cpu, Backend& gpu, std::mt19937& rng, const AttentionCase& c) {
  KvLayout kv;
  kv.kv_heads = c.kv_heads, kv.block_size = c.block_size, kv.head_dim = c.head_dim, kv.window = c.window;
  kv.dtype = c.kv_dtype, kv.scale = c.scale, kv.softcap = c.softcap;
  int64_t blocks_needed = 0, rows = 0;
  for (const SeqShape& s : c.seqs) {
    blocks_needed += (s.pos + s.rows + kv.block_size - 1) / kv.block_size;
    rows += s.rows;
  }
  kv.num_blocks = blocks_needed + 3;
  const int64_t qd = c.q_heads * c.head_dim, kvd = c.kv_heads * c.head_dim;
  std::vector<int32_t> perm(kv.num_blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSeq> seqs;
  std::vector<int32_t> tokens, positions;
  int64_t row = 0, next_block = 0;
  for (const SeqShape& s : c.seqs) {
    const int64_t blocks = (s.pos + s.rows + kv.block_size - 1) / kv.block_size;
    tables.emplace_back(perm.begin() + next_block, perm.begin() + next_block + blocks);
    next_block += blocks;
    seqs.push_back({row, s.rows, s.pos, nullptr, blocks});
    for (int64_t r = 0; r < s.rows; ++r) {
      tokens.push_back(0);
      positions.push_back(static_cast<int32_t>(s.pos + r));
    }
    row += s.rows;
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i].blocks = tables[i].data();
  StepBatch step;
  step.tokens = tokens;
  step.positions = positions;
  step.seqs = seqs;
  cpu.begin_step(step);
  gpu.begin_step(step);
  // q/k/v as slices of one fused qkv row, as the model lays them out.
  const int64_t stride = qd + 2 * kvd;
  Vec qkv = t.random(rows * stride, -2, 2);
  Vec cache_k = t.random(kv.elements_per_layer(), -2, 2), cache_v = t.random(kv.elements_per_layer(), -2, 2);
  Buffer c_qkv = put(cpu, qkv, DType::F32), g_qkv = put(gpu, qkv, gpu.activation_dtype());
  Buffer c_kc = put(cpu, cache_k, kv.dtype), c_vc = put(cpu, cache_v, kv.dtype);
  Buffer g_kc = put(gpu, cache_k, kv.dtype), g_vc = put(gpu, cache_v, kv.dtype);
  Buffer c_out = cpu.alloc(rows * qd, DType::F32), g_out = gpu.alloc(rows * qd, gpu.activation_dtype());
  cpu.paged_attention(c_qkv.view(), stride, c_qkv.view(qd), c_qkv.view(qd + kvd), stride, c_kc.view(), c_vc.view(), kv,
                      c.q_heads, c_out.view());
  gpu.paged_attention(g_qkv.view(), stride, g_qkv.view(qd), g_qkv.view(qd + kvd), stride, g_kc.view(), g_vc.view(), kv,
                      c.q_heads, g_out.view());
  EXPECT_TRUE(raw(cpu, c_kc) == raw(gpu, g_kc)) << c.name << ": K cache after the append";
  EXPECT_TRUE(raw(cpu, c_vc) == raw(gpu, g_vc)) << c.name << ": V cache after the append";
  const Vec ref = get(cpu, c_out), got = get(gpu, g_out);
  EXPECT_LT(t.rel(got, ref), 1e-2) << c.name;
  // Row by row too: a wrong row hides in the global error of a long prefill.
  double worst = 0;
  int64_t worst_row = -1;
  for (int64_t r = 0; r < rows; ++r) {
    const Vec a(got.begin() + r * qd, got.begin() + (r + 1) * qd), b(ref.begin() + r * qd, ref.begin() + (r + 1) * qd);
    const double e = rel_err(a, b);
    if (e > worst) worst = e, worst_row = r;
  }
  EXPECT_LT(worst, 2e-2) << c.name << ": row " << worst_row;
}

// Mixed steps: a prefill chunk continuing a cached prefix, a fresh prefill and decode rows.
std::vector<SeqShape> mixed_step() { return {{37, 21}, {50, 0}, {1, 200}, {1, 5}}; }

TEST_F(CudaVsCpu, PagedAttentionMixedStepsMatchCpuForEveryHeadDim) {
  for (int64_t hd : {64, 128, 256})
    for (DType kvt : {DType::BF16, DType::F32})
      check_attention(*this, *cpu_, *gpu_, rng_,
                      {hd, 8, 2, 0, kvt, mixed_step(), "mixed hd " + std::to_string(hd) + " " + dtype_name(kvt)});
}

TEST_F(CudaVsCpu, PagedAttentionGroupShapesMatchCpu) {
  // MHA (group 1: 16 rows a tile), GQA 4, 7 (Qwen-like: 2 rows of 7 heads), MQA 32 (two head chunks).
  for (auto [qh, kvh] : std::vector<std::pair<int64_t, int64_t>>{{4, 4}, {8, 2}, {28, 4}, {32, 1}})
    check_attention(*this, *cpu_, *gpu_, rng_,
                    {64, qh, kvh, 0, DType::BF16, mixed_step(),
                     "heads " + std::to_string(qh) + "/" + std::to_string(kvh)});
}

TEST_F(CudaVsCpu, PagedAttentionSlidingWindowMatchesCpu) {
  for (int64_t window : {1, 24, 100})
    check_attention(*this, *cpu_, *gpu_, rng_,
                    {128, 8, 2, window, DType::BF16, {{37, 21}, {50, 0}, {1, 200}, {1, 3000}},
                     "window " + std::to_string(window)});
}

// Gemma 2: a query scale other than 1/sqrt(head_dim) and soft-capped scores (large q so that the cap bites).
TEST_F(CudaVsCpu, PagedAttentionScaleAndSoftcapMatchCpu) {
  check_attention(*this, *cpu_, *gpu_, rng_,
                  {128, 8, 4, 0, DType::BF16, mixed_step(), "scale 1/16, softcap 5", 1.0f / 16, 5.0f});
  check_attention(*this, *cpu_, *gpu_, rng_, {64, 8, 4, 0, DType::BF16, {{1, 3000}}, "decode softcap", 0.5f, 3.0f});
}

// Batch-1 decode at long contexts: few tiles, so the context is split over many thread blocks and merged.
TEST_F(CudaVsCpu, PagedAttentionDecodeBatchOneAtLongContextsMatchesCpu) {
  for (int64_t hd : {64, 128, 256})
    for (int64_t ctx : {1, 17, 1000, 4095})
      check_attention(*this, *cpu_, *gpu_, rng_,
                      {hd, 32, 8, 0, DType::BF16, {{1, ctx}},
                       "decode hd " + std::to_string(hd) + " at " + std::to_string(ctx)});
  check_attention(*this, *cpu_, *gpu_, rng_, {128, 32, 8, 512, DType::BF16, {{1, 4095}}, "decode window 512 at 4095"});
}

TEST_F(CudaVsCpu, PagedAttentionDecodeBatchMatchesCpu) {
  std::vector<SeqShape> batch;
  const int n = emulated_device() ? 24 : 64;
  for (int i = 0; i < n; ++i) batch.push_back({1, 7 + 31 * i});
  check_attention(*this, *cpu_, *gpu_, rng_, {128, 16, 4, 0, DType::BF16, batch, "decode batch " + std::to_string(n)});
}

// Cache pages of other sizes: the kernel's K/V chunks stop at page ends (short chunks at 8, pages
// that do not line up with the 16-position chunks at 24), in prefill, decode and split decode.
TEST_F(CudaVsCpu, PagedAttentionCachePagesOfOtherSizesMatchCpu) {
  for (int64_t bs : {8, 24}) {
    AttentionCase c{64, 8, 2, 0, DType::BF16, {{37, 21}, {50, 0}, {1, 200}, {1, 1000}},
                    "block size " + std::to_string(bs)};
    c.block_size = bs;
    check_attention(*this, *cpu_, *gpu_, rng_, c);
    AttentionCase w{64, 8, 2, 40, DType::BF16, {{1, 500}}, "window 40, block size " + std::to_string(bs)};
    w.block_size = bs;
    check_attention(*this, *cpu_, *gpu_, rng_, w);
  }
}

// A head dim whose bf16 rows are not whole 16-byte packs (the one-element staging path), and an
// f32 cache of the same dim (whole packs).
TEST_F(CudaVsCpu, PagedAttentionHeadDimOffTheSixteenBytePacksMatchesCpu) {
  for (DType kvt : {DType::BF16, DType::F32})
    check_attention(*this, *cpu_, *gpu_, rng_,
                    {36, 8, 2, 0, kvt, {{20, 5}, {1, 300}}, std::string("hd 36 ") + dtype_name(kvt)});
}

// 20 q heads on one kv head: the second head chunk of a tile holds only 4 of its 16 query slots.
TEST_F(CudaVsCpu, PagedAttentionPartialHeadChunkMatchesCpu) {
  check_attention(*this, *cpu_, *gpu_, rng_, {64, 20, 1, 0, DType::BF16, {{3, 40}, {1, 700}}, "20 heads / 1"});
}

// Prefill chunks late in a 4K context (the tiled path: each K/V block read once per 16 queries).
TEST_F(CudaVsCpu, PagedAttentionPrefillChunksMatchCpu) {
  if (emulated_device()) {
    check_attention(*this, *cpu_, *gpu_, rng_, {128, 16, 4, 0, DType::BF16, {{64, 960}}, "chunk 64 at 960"});
    check_attention(*this, *cpu_, *gpu_, rng_, {64, 8, 8, 0, DType::BF16, {{128, 0}, {40, 220}}, "MHA prefill 128"});
    check_attention(*this, *cpu_, *gpu_, rng_, {256, 8, 4, 256, DType::BF16, {{80, 500}}, "hd 256 window 256"});
    return;
  }
  check_attention(*this, *cpu_, *gpu_, rng_, {128, 16, 4, 0, DType::BF16, {{128, 3968}}, "chunk 128 at 3968"});
  check_attention(*this, *cpu_, *gpu_, rng_, {64, 8, 8, 0, DType::BF16, {{512, 0}, {100, 900}}, "MHA prefill 512"});
  check_attention(*this, *cpu_, *gpu_, rng_, {256, 8, 4, 1024, DType::BF16, {{300, 2000}}, "hd 256 window 1024"});
}

}  // namespace
}  // namespace tpbatch
