// CPU paged attention, old (per-(row, head) reference loop) vs new (tiled, flash-style), on the
// 125M model's attention shape (12 q heads, 4 kv heads, head_dim 64, 16-position blocks), F32 and
// BF16 caches, for prefill chunks and decode batches, each against its bound measured here:
//   memory bound  = K/V bytes the step must read / read bandwidth
//   compute bound = attention FLOPs (4 * head_dim per query, head and visible position) / fp32 FMA peak
//   tpbatch_attention_bench [--threads N] [--reps N] [--only SUBSTRING] [--no-old] [--group G]
//                           [--decode-kernel off]
// (--only: the workloads whose name contains it; --no-old: skip the slow reference loop; --group: q
// heads per kv head, 3 = the 125M model; --decode-kernel off: every tile on the portable tiled kernel,
// the "new" of before the AVX2 decode kernel.)
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/attention/paged_attention.h"
#include "backend/cpu/attention/decode_attention_tile.h"
#include "backend/dtype.h"
#include "register_chains.h"

namespace {

using tpbatch::AttentionSeq;
using tpbatch::DType;
using tpbatch::KvLayout;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Read bandwidth of the team: sum 1 GiB of floats, best of 5.
double read_gbps() {
  const size_t n = size_t(1) << 28;
  std::vector<float> buf(n, 1.0f);
  double best = 0, sink = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = Clock::now();
    double total = 0;
#pragma omp parallel reduction(+ : total)
    {
      float acc[16] = {};
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += buf[i + j];
      for (float a : acc) total += a;
    }
    best = std::max(best, n * sizeof(float) / seconds_since(t0) / 1e9);
    sink += total;
  }
  if (sink < 0) std::printf("?");
  return best;
}

double fma_gflops() {
  const long iters = 20'000'000;
  int lanes = 4, chains = 12;
  float (*fn)(long, float) = fma_chains_sse;
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) fn = fma_chains_avx512, lanes = 16, chains = 16;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) fn = fma_chains_avx2, lanes = 8;
#endif
  double best = 0, sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = Clock::now();
    double total = 0;
#pragma omp parallel reduction(+ : total)
    total += fn(iters, 0.5f);
    best = std::max(best, omp_get_max_threads() * 2.0 * lanes * chains * iters / seconds_since(t0) / 1e9);
    sink += total;
  }
  if (sink == 12345) std::printf("?");
  return best;
}

int64_t g_group = 3;  // q heads per kv head (--group)

struct Workload {
  std::string name;
  std::vector<std::pair<int64_t, int64_t>> seqs;  // (context before the step, rows in the step)
};

struct Result {
  double old_s, new_s, bytes, flops;
};

Result measure(const Workload& w, DType dtype, int reps, bool with_old) {
  const int64_t kvh = 4, qh = kvh * g_group, hd = 64, bs = 16;
  int64_t blocks = 0, rows = 0;
  for (auto [ctx, n] : w.seqs) {
    blocks += (ctx + n + bs - 1) / bs;
    rows += n;
  }
  KvLayout kv{blocks, kvh, bs, hd, 0, dtype};
  const size_t esize = dtype == DType::F32 ? 4 : 2;
  std::vector<uint8_t> kc(kv.elements_per_layer() * esize), vc(kv.elements_per_layer() * esize);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> uni(-1, 1);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  if (dtype == DType::F32) {
    for (size_t i = 0; i < kv.elements_per_layer(); ++i) reinterpret_cast<float*>(kc.data())[i] = uni(rng);
  } else {
    for (size_t i = 0; i < kv.elements_per_layer(); ++i) reinterpret_cast<uint16_t*>(kc.data())[i] = tpbatch::f32_to_bf16(uni(rng));
  }
  vc = kc;
  std::vector<AttentionSeq> seqs;
  int64_t b = 0, r = 0;
  double bytes = 0, flops = 0;
  for (auto [ctx, n] : w.seqs) {
    const int64_t nb = (ctx + n + bs - 1) / bs;
    seqs.push_back({r, n, ctx, table.data() + b, nb});
    b += nb;
    r += n;
    bytes += 2.0 * kvh * (ctx + n) * hd * esize;
    for (int64_t i = 0; i < n; ++i) flops += 4.0 * hd * qh * (ctx + i + 1);
  }
  std::vector<float> q(rows * 3 * qh * hd), out(rows * qh * hd);
  for (auto& x : q) x = uni(rng);
  const int64_t stride = (qh + 2 * kvh) * hd;
  auto time = [&](auto fn) {
    double best = 1e30;
    for (int i = 0; i < reps; ++i) {
      auto t0 = Clock::now();
      fn(q.data(), stride, q.data() + qh * hd, q.data() + (qh + kvh) * hd, stride, kc.data(), vc.data(), kv, qh,
         seqs.data(), static_cast<int64_t>(seqs.size()), out.data());
      best = std::min(best, seconds_since(t0));
    }
    return best;
  };
  Result res{};
  res.old_s = with_old ? time(tpbatch::cpu::paged_attention_reference) : NAN;
  res.new_s = time(tpbatch::cpu::paged_attention);
  res.bytes = bytes;
  res.flops = flops;
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  bool with_old = true;
  std::string only;  // run only the workloads whose name contains this
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads")) omp_set_num_threads(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--only")) only = argv[i + 1];
    if (!std::strcmp(argv[i], "--group")) g_group = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--decode-kernel") && !std::strcmp(argv[i + 1], "off"))
      tpbatch::cpu::detail::set_decode_kernel_enabled(false);
  }
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--no-old")) with_old = false;
  const double bw = read_gbps(), peak = fma_gflops();
  std::printf("attention bench: %d threads; read bandwidth %.1f GB/s; fp32 FMA peak %.1f GFLOP/s\n",
              omp_get_max_threads(), bw, peak);
  std::printf("shape: %lld q heads, 4 kv heads, head_dim 64, 16-position blocks (the 125M model at group 3), shuffled "
              "blocks; decode kernel %s\n",
              static_cast<long long>(4 * g_group), tpbatch::cpu::detail::decode_kernel_enabled() ? "on" : "off");
  std::vector<Workload> loads;
  loads.push_back({"prefill 1 x 512 rows @0", {{0, 512}}});
  loads.push_back({"prefill chunk 128 @1024", {{1024, 128}}});
  loads.push_back({"prefill 8 x 128 rows @0", std::vector<std::pair<int64_t, int64_t>>(8, {0, 128})});
  loads.push_back({"decode 1 seq @2048", {{2047, 1}}});
  loads.push_back({"decode 16 seqs @256", std::vector<std::pair<int64_t, int64_t>>(16, {255, 1})});
  loads.push_back({"decode 32 seqs @1024", std::vector<std::pair<int64_t, int64_t>>(32, {1023, 1})});
  std::printf("%-26s %-5s %10s %10s %10s %8s %8s %10s\n", "workload", "cache", "old ms", "new ms", "bound ms",
              "speedup", "new/bnd", "bound by");
  for (DType dt : {DType::F32, DType::BF16})
    for (const auto& w : loads) {
      if (w.name.find(only) == std::string::npos) continue;
      const Result r = measure(w, dt, reps, with_old);
      const double mem = r.bytes / (bw * 1e9), comp = r.flops / (peak * 1e9), bound = std::max(mem, comp);
      std::printf("%-26s %-5s %10.3f %10.3f %10.3f %7.1fx %8.2f %10s\n", w.name.c_str(),
                  dt == DType::F32 ? "f32" : "bf16", r.old_s * 1e3, r.new_s * 1e3, bound * 1e3, r.old_s / r.new_s,
                  r.new_s / bound, mem > comp ? "K/V bytes" : "FMA peak");
    }
  std::printf("(new/bnd: time over the larger bound; 1.00 = at the hardware limit)\n");
  return 0;
}
