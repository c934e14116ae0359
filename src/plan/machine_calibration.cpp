#include "plan/machine_calibration.h"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "backend/backend.h"
#include "backend/buffer.h"
#include "backend/cpu/attention/paged_attention.h"
#include "backend/cpu/gemm/gemm.h"
#include "comm/launcher_env.h"
#include "topology/cpu_share.h"

namespace tpbatch {
namespace {

// The ranks of this node measure at once: a barrier before each timed pass lines them up (a no-op
// outside MPI), so their passes overlap as a run's ranks' steps do.
MPI_Comm g_node = MPI_COMM_NULL;
void line_up() {
  if (g_node != MPI_COMM_NULL) MPI_Barrier(g_node);
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median seconds of fn() over reps after one warm-up call, the ranks lined up before each. The
// median, not the best: a run lasts minutes and meets the machine's usual state (other work on a
// shared machine included), not its quietest moment.
template <typename Fn>
double pass_seconds(int reps, Fn&& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    line_up();
    double start = now_s();
    fn();
    double end = now_s();
    // The node's pass runs from its first rank's start to its last rank's end (steady_clock is the
    // node's one monotonic clock): with more ranks than cores they take turns, and a rank that
    // leaves the barrier late or runs its pass whole while the others wait would, timed alone,
    // be credited with a core of its own.
    if (g_node != MPI_COMM_NULL) {
      MPI_Allreduce(MPI_IN_PLACE, &start, 1, MPI_DOUBLE, MPI_MIN, g_node);
      MPI_Allreduce(MPI_IN_PLACE, &end, 1, MPI_DOUBLE, MPI_MAX, g_node);
    }
    t.push_back(end - start);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The element-wise work of a decode step at m rows, through the CPU backend as model_runner calls
// it, in microseconds per row: per layer (input RMSNorm, RoPE of the q and k heads, residual add +
// RMSNorm, SiLU x up, residual add) and for the logits (final RMSNorm, logit_stats over the whole
// vocabulary: max, argmax and sum of exp per row).
struct StepOverhead {
  double layer_us = 0.0, logits_us = 0.0;
};
StepOverhead measure_step_overhead(const ModelConfig& c, int64_t m) {
  auto be = make_cpu_backend();
  const int64_t H = c.hidden_size, hd = c.head_dim, I = std::max<int64_t>(1, c.intermediate_size);
  const int64_t nqkv = (c.num_heads + 2 * c.num_kv_heads) * hd, V = c.vocab_size;
  Buffer x = be->alloc(static_cast<size_t>(m * H), DType::F32), h = be->alloc(static_cast<size_t>(m * H), DType::F32),
         proj = be->alloc(static_cast<size_t>(m * H), DType::F32), w = be->alloc(static_cast<size_t>(H), DType::F32),
         qkv = be->alloc(static_cast<size_t>(m * nqkv), DType::F32),
         inv_freq = be->alloc(static_cast<size_t>(std::max<int64_t>(1, hd / 2)), DType::F32),
         gu = be->alloc(static_cast<size_t>(m * 2 * I), DType::F32), act = be->alloc(static_cast<size_t>(m * I), DType::F32),
         logits = be->alloc(static_cast<size_t>(m * V), DType::F32), stats = be->alloc(static_cast<size_t>(4 * m), DType::F32);
  auto fill = [&](Buffer& b, float v) {
    std::vector<float> host(b.count(), v);
    be->upload(b.view(), host.data(), host.size() * sizeof(float));
  };
  for (Buffer* b : {&x, &h, &proj, &w, &qkv, &inv_freq, &gu, &act, &logits}) fill(*b, 0.01f);
  std::vector<int32_t> tokens(static_cast<size_t>(m), 0), positions(static_cast<size_t>(m), 100), targets(static_cast<size_t>(m), -1);
  std::vector<int64_t> logit_rows(static_cast<size_t>(m));
  std::iota(logit_rows.begin(), logit_rows.end(), 0);
  be->begin_step(StepBatch{tokens, positions, {}, logit_rows, targets, {}});
  const float eps = 1e-5f;
  // Passes of many layers and several logits rounds: long against the scheduler's time slice, so
  // ranks taking turns on the cores do not add a slice's wait to a pass of a few hundred us.
  const int layers = static_cast<int>(std::max<int64_t>(24, 2 * c.num_layers));
  const int logit_rounds = 8;
  StepOverhead o;
  o.layer_us = pass_seconds(5, [&] {
    for (int l = 0; l < layers; ++l) {
      be->rmsnorm(x.view(), w.view(), h.view(), m, H, eps);
      be->rope(qkv.view(), nqkv, c.num_heads, hd, inv_freq.view());
      be->rope(qkv.view(c.num_heads * hd), nqkv, c.num_kv_heads, hd, inv_freq.view());
      be->add_rmsnorm(x.view(), proj.view(), w.view(), h.view(), m, H, eps);
      be->silu_mul(gu.view(), act.view(), m, I);
      be->add(x.view(), proj.view(), static_cast<size_t>(m * H));
    }
  }) / layers / static_cast<double>(m) * 1e6;
  o.logits_us = pass_seconds(5, [&] {
    for (int r = 0; r < logit_rounds; ++r) {
      be->rmsnorm(x.view(), w.view(), h.view(), m, H, eps);
      be->logit_stats(logits.view(), m, V, 0, 0, stats.view());
    }
  }) / logit_rounds / static_cast<double>(m) * 1e6;
  return o;
}

double measure_memory_gbs() {
  const size_t n = (size_t{256} << 20) / sizeof(float);
  std::vector<float> buf(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023);
  // Sixteen independent sums per thread (vectorised): one running float sum is a chain of dependent
  // adds, bound by the add's latency at ~3 GB/s a core, far below the memory.
  volatile float sink = 0.0f;
  const double t = pass_seconds(5, [&] {
    float sum = 0.0f;
#pragma omp parallel reduction(+ : sum)
    {
      const size_t th = static_cast<size_t>(omp_get_thread_num()), nt = static_cast<size_t>(omp_get_num_threads());
      const size_t b = n / 16 * th / nt * 16, e = n / 16 * (th + 1) / nt * 16;
      float acc[16] = {};
      for (size_t i = b; i < e; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += buf[i + static_cast<size_t>(j)];
      for (float a : acc) sum += a;
    }
    sink = sink + sum;
  });
  return static_cast<double>(n * sizeof(float)) / t / 1e9;
}

// Best FLOP/s of y = x · w^T at m x n x k, fp32, the same weights every call (cache-resident when small).
double measure_gemm_flops(int64_t m, int64_t n, int64_t k, int reps) {
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), w(static_cast<size_t>(n * k), 0.25f),
      y(static_cast<size_t>(m * n));
  const double t = pass_seconds(reps, [&] { cpu::gemm_nt(x.data(), w.data(), DType::F32, y.data(), m, n, k); });
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / t;
}

// One decoder layer's linear layers (q+k+v, o, gate+up, down) as gemm_nt shapes, n scaled so a layer
// is at most 32 MiB, in copies totalling >= 128 MiB: a pass over all copies streams the weights from
// memory, as a decode step streams a model far larger than the caches.
struct LayerWeights {
  struct Matrix {
    int64_t n, k;
  };
  std::vector<Matrix> shapes;
  std::vector<std::vector<uint8_t>> copies;  // each: the shapes' weights back to back
  DType dtype;
  int64_t max_k = 0, max_n = 0;
  double elements = 0;  // of one copy

  LayerWeights(const ModelConfig& c, DType w) : dtype(w) {
    const int64_t H = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
    const int64_t inter = std::max<int64_t>(1, c.intermediate_size);
    shapes = {{q + 2 * kv, H}, {H, q}, {2 * inter, H}, {H, inter}};
    double bytes = 0;
    for (const auto& s : shapes) bytes += static_cast<double>(s.n * s.k) * dtype_size(w);
    const double limit = 32.0 * (1 << 20), total = 128.0 * (1 << 20);
    const double scale = std::min(1.0, limit / bytes);
    for (auto& s : shapes) s.n = std::max<int64_t>(16, static_cast<int64_t>(static_cast<double>(s.n) * scale));
    size_t layer_bytes = 0;
    for (const auto& s : shapes) {
      layer_bytes += static_cast<size_t>(s.n * s.k) * dtype_size(w);
      elements += static_cast<double>(s.n * s.k);
      max_k = std::max(max_k, s.k);
      max_n = std::max(max_n, s.n);
    }
    const size_t n_copies = std::max<size_t>(1, static_cast<size_t>(total / static_cast<double>(layer_bytes)) + 1);
    // 0x3C in every byte: 0.0115 as fp32 and bf16, 1.06 as fp16, finite in each.
    copies.assign(n_copies, std::vector<uint8_t>(layer_bytes, 0x3C));
  }

  // Median seconds of one pass over every copy at m rows; allreduce_floats > 0: after the o and the
  // down projection of each copy an MPI_Allreduce of that many floats over the world, as a
  // tensor-parallel layer synchronises its ranks twice.
  double seconds_at(int64_t m, int reps, int allreduce_floats = 0, MPI_Comm group = MPI_COMM_WORLD) const {
    std::vector<float> x(static_cast<size_t>(m * max_k), 0.5f), y(static_cast<size_t>(m * max_n));
    std::vector<float> sum(static_cast<size_t>(std::max(1, allreduce_floats)), 1.0f),
        out(static_cast<size_t>(std::max(1, allreduce_floats)));
    return pass_seconds(reps, [&] {
      for (const auto& copy : copies) {
        size_t offset = 0;
        for (size_t i = 0; i < shapes.size(); ++i) {
          const Matrix& s = shapes[i];
          cpu::gemm_nt(x.data(), copy.data() + offset, dtype, y.data(), m, s.n, s.k);
          offset += static_cast<size_t>(s.n * s.k) * dtype_size(dtype);
          if (allreduce_floats > 0 && (i == 1 || i == 3))
            MPI_Allreduce(sum.data(), out.data(), allreduce_floats, MPI_FLOAT, MPI_SUM, group);
        }
      }
    });
  }
  // Median FLOP/s of one pass over every copy at m rows.
  double flops_at(int64_t m, int reps) const {
    return 2.0 * static_cast<double>(m) * elements * static_cast<double>(copies.size()) / seconds_at(m, reps);
  }
};

// Best FLOP/s of cpu::paged_attention over `seqs` sequences, each `rows` new rows after `context`
// cached positions, at the model's heads and KV dtype; `layers` layer caches rotated (decode: the
// step reads every layer's cache from memory).
double attention_flops(const ModelConfig& c, DType kv_dtype, int64_t seqs, int64_t rows, int64_t context,
                       int64_t layers, int reps) {
  const int64_t qh = c.num_heads, kvh = c.num_kv_heads, hd = c.head_dim, bs = 16;
  const int64_t per_seq_blocks = (context + rows + bs - 1) / bs;
  KvLayout kv{seqs * per_seq_blocks, kvh, bs, hd, 0, kv_dtype};
  const size_t cache_bytes = kv.elements_per_layer() * dtype_size(kv_dtype);
  std::vector<std::vector<uint8_t>> kc(static_cast<size_t>(layers), std::vector<uint8_t>(cache_bytes, 0x3C)),
      vc = kc;
  std::vector<int32_t> table(static_cast<size_t>(kv.num_blocks));
  std::iota(table.begin(), table.end(), 0);
  std::vector<AttentionSeq> spans;
  double flops = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    spans.push_back({s * rows, rows, context, table.data() + s * per_seq_blocks, per_seq_blocks});
    for (int64_t i = 0; i < rows; ++i) flops += 4.0 * static_cast<double>(hd * qh * (context + i + 1));
  }
  const int64_t stride = (qh + 2 * kvh) * hd;
  std::vector<float> qkv(static_cast<size_t>(seqs * rows * stride), 0.01f), out(static_cast<size_t>(seqs * rows * qh * hd));
  const double t = pass_seconds(reps, [&] {
    for (int64_t l = 0; l < layers; ++l)
      cpu::paged_attention(qkv.data(), stride, qkv.data() + qh * hd, qkv.data() + (qh + kvh) * hd, stride,
                           kc[static_cast<size_t>(l)].data(), vc[static_cast<size_t>(l)].data(), kv, qh, spans.data(),
                           seqs, out.data());
  });
  return flops * static_cast<double>(layers) / t;
}

// Best seconds of one MPI_Allreduce of `floats` floats, over `reps` after a warm-up: the transport's
// own latency and bandwidth. (The waits for a peer's turn on a core, which a single 8-byte call
// meets at random, 0.5 us to 4.6 ms in its median on this machine, are measured between GEMMs.)
double allreduce_seconds(int floats, int reps) {
  std::vector<float> in(static_cast<size_t>(floats), 1.0f), out(static_cast<size_t>(floats));
  MPI_Allreduce(in.data(), out.data(), floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(in.data(), out.data(), floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0, slowest = 0.0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the step waits for the last rank
    times.push_back(slowest);
  }
  return *std::min_element(times.begin(), times.end());
}

// The node's total of a per-rank rate (this rank's own outside MPI).
double node_total(double mine) {
  if (g_node == MPI_COMM_NULL) return mine;
  double sum = 0.0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, g_node);
  return sum;
}

void measure_rates(const ModelConfig& config, const CalibrationRequest& r, Calibration& c) {
  if (r.memory) c.memory_gbs = node_total(measure_memory_gbs());
  if (!r.gemm) return;
  const double peak = measure_gemm_flops(512, 2048, 2048, 3);
  const double decode = measure_gemm_flops(32, 2048, 768, 20);
  c.gemm_tflops = node_total(peak) / 1e12;
  c.gemm_decode_tflops = node_total(decode) / 1e12;
  c.gemm_half_rows = decode < peak ? 32.0 * (peak / decode - 1.0) : 0.0;
  {
    const LayerWeights layer(config, r.weight);
    for (int64_t m : {1, 4, 8, 16, 32, 64, 128}) {
      if (m > 16 && m / 2 >= r.rows) break;  // the point before covered the row shape's rows
      c.gemm_rates.push_back(GemmRate{static_cast<double>(m), node_total(layer.flops_at(m, 5)) / 1e12});
    }
    // The allreduce as a tensor-parallel step meets it: between layers' GEMMs, the ranks arriving
    // apart (with more ranks than cores a peer may be waiting for its turn on a core, a scheduler
    // time slice, while the caller spins). alpha = the time the synchronised pass takes beyond the
    // same pass without allreduces, per allreduce, less the bytes' share at the isolated B.
    // Measured for each tensor-parallel size t dividing the world, in the groups a layout of that
    // t makes (consecutive ranks, topology.cpp), all groups at once: on 4 ranks on 2 cores two
    // pairs syncing apart wait for a partner's turn on a core far more than one group of 4 in
    // lockstep does (measured 2 ms against 12 us an allreduce; a TP=2 x PP=2 run met ~2 ms).
    if (c.allreduce_measured && g_node != MPI_COMM_NULL) {
      const int64_t m = std::clamp<int64_t>(r.rows, 1, 128);
      const int floats = static_cast<int>(m * config.hidden_size);
      const double plain = layer.seconds_at(m, 5);
      const double n = 2.0 * static_cast<double>(layer.copies.size());
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      for (int t = 2; t <= c.allreduce_ranks; ++t) {
        if (c.allreduce_ranks % t != 0) continue;
        MPI_Comm group = MPI_COMM_NULL;
        MPI_Comm_split(MPI_COMM_WORLD, rank / t, rank, &group);
        const double synced = layer.seconds_at(m, 5, floats, group);
        MPI_Comm_free(&group);
        const double bytes_us = 2.0 * (t - 1) / t * 4.0 * floats / (c.allreduce_gbs * 1e3);
        const double alpha = std::max(c.alpha_us, (synced - plain) / n * 1e6 - bytes_us);
        c.synced_alphas.push_back(TensorAlpha{t, alpha});
        if (t == c.allreduce_ranks) c.synced_alpha_us = alpha;
      }
    }
  }
  const int64_t rows = std::max<int64_t>(1, r.rows);
  const int64_t context = std::max<int64_t>(1, r.prompt_tokens + r.new_tokens / 2);
  const int64_t per_layer_kv = rows * (context + 1) * config.num_kv_heads * config.head_dim * 2 *
                               static_cast<int64_t>(dtype_size(r.kv));
  const int64_t layers = std::clamp<int64_t>((int64_t{128} << 20) / std::max<int64_t>(1, per_layer_kv), 1,
                                             std::max<int64_t>(1, config.num_layers));
  c.attention_tflops = node_total(attention_flops(config, r.kv, rows, 1, context, layers, 3)) / 1e12;
  // Prefill: whole prompts of up to 512 tokens, as many as make the work of 8 x 128-token prompts
  // (the rate, not the time, is what is kept; a long prompt's quadratic work would only cost time).
  {
    // Times, not rates: the node's equivalent is 1 / the sum of the ranks' 1 / time, as for rates.
    const StepOverhead o = measure_step_overhead(config, rows);
    c.layer_overhead_us = 1.0 / node_total(1.0 / std::max(o.layer_us, 1e-9));
    c.logits_overhead_us = 1.0 / node_total(1.0 / std::max(o.logits_us, 1e-9));
  }
  const int64_t prompt = std::clamp<int64_t>(r.prompt_tokens, 1, 512);
  const int64_t prompts = std::clamp<int64_t>(8 * 128 * 128 / (prompt * prompt), 1, std::min<int64_t>(rows, 8));
  c.prefill_attention_tflops = node_total(attention_flops(config, r.kv, prompts, prompt, 0, 1, 2)) / 1e12;
}

}  // namespace

Calibration calibrate_machine(const ModelConfig& config, const CalibrationRequest& request) {
  Calibration c;
  const bool mpi = launched_world_size() >= 2;
  int local = 1;
  if (mpi) {
    MPI_Init(nullptr, nullptr);
    int size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &c.mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size >= 2) {
      const double small = allreduce_seconds(2, 200);               // 8 B
      const double large = allreduce_seconds(1 << 20, 20);          // 4 MiB
      const double S = 4.0 * (1 << 20);
      c.allreduce_measured = true;
      c.allreduce_ranks = size;
      c.alpha_us = small * 1e6;
      c.allreduce_gbs = 2.0 * (size - 1) / size * S / std::max(large - small, 1e-9) / 1e9;
    }
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &g_node);
    MPI_Comm_size(g_node, &local);
  }
  c.ranks_measuring = local;
  // The threads a run's rank gets and the machine's CPUs, as run_job counts them (after MPI_Init:
  // collective over the world under mpirun, this process's CPUs alone without it).
  const CpuShare share = cpu_share();
  c.gemm_threads = request.threads > 0 ? request.threads : share.threads;
  c.cores = share.machine_cpus;
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(c.gemm_threads);
  measure_rates(config, request, c);
  omp_set_num_threads(saved_threads);
  if (mpi) {
    MPI_Comm_free(&g_node);
    g_node = MPI_COMM_NULL;
    MPI_Finalize();
  }
  return c;
}

}  // namespace tpbatch
