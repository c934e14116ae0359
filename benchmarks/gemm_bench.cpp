// gemm_nt on the 125M model's linear-layer shapes, against the bounds measured in the same run:
// memory read bandwidth (a streaming read of 1 GiB) and the fp32 GEMM peak (a large OpenBLAS
// sgemm), for f32/bf16/f16 weights, each thread count, and OpenBLAS sgemv/sgemm on the same shapes.
// Weights rotate through copies totalling >= 256 MiB so every call streams them from DRAM, as a
// decode step of the whole model does (the model is far larger than L3).
//   tpbatch_gemm_bench [--threads 1,2] [--min-seconds 0.15] [--rows 1,2,4,...] [--clock wall|cpu]
//                      [--shapes qkv,down] [--nk NxK] [--types F32,BF16,F16,OpenBLAS] [--crossover 0|1]
//                      [--isa portable|avx2-fma-f16c|avx512|avx512-bf16|amx-bf16] [--hot 0|1] [--weight-offset 0..63]
//                      [--path auto|row-blocked|broadcast|panel-sgemm] [--instruction-rates 1]
// --nk 128x768 measures that one shape instead (with --hot 1 and n*k small enough for L2: the
// kernel's arithmetic rate alone).
// --hot 1: the same copy of each weight every call (cache-resident when it fits L2/L3), so the
// compute rate of a kernel shows without the DRAM stream; the gap to the default (streamed) run is
// the part of the weight stream the kernel fails to overlap with its arithmetic.
#include <cblas.h>
#include <omp.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "backend/cpu/gemm/blas_core.h"
#include "backend/cpu/gemm/gemm.h"
#include "backend/dtype.h"
#include "isa_option.h"
#include "register_chains.h"

namespace {

using tpbatch::DType;
namespace cpu = tpbatch::cpu;

// --clock wall (default): elapsed time. --clock cpu: process CPU time divided by the thread count,
// for a shared machine where other jobs take turns on the cores (the elapsed time would then
// measure the load, not the kernel); memory contention from the other jobs still shows.
bool g_cpu_clock = false;
int g_clock_threads = 1;
bool g_hot = false;  // --hot 1: no rotation over copies
size_t g_weight_offset = 0;  // --weight-offset B: weights B bytes past a 64-byte boundary

double now_s() {
  if (g_cpu_clock) {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec)) / g_clock_threads;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> out;
  for (const char* p = s; *p;) {
    out.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
  }
  return out;
}

// Streaming read of `bytes` by the OpenMP team (AVX2 where present, so the read is not the limit).
#if defined(__x86_64__)
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  alignas(32) float t[8];
  _mm256_store_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif
float sum_plain(const float* p, size_t n) {
  float acc[16] = {};
  for (size_t i = 0; i + 16 <= n; i += 16)
    for (int j = 0; j < 16; ++j) acc[j] += p[i + j];
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

double read_gbps(int threads) {
  const size_t n = size_t(1) << 28;  // 1 GiB of floats
  std::vector<float> buf(n, 1.0f);
  const bool avx2 = cpu::gemm_isa() >= cpu::GemmIsa::Avx2Fma;
  double best = 0, sink = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const double t0 = now_s();
    double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
      const size_t b = n * t / nt, e = n * (t + 1) / nt;
#if defined(__x86_64__)
      total += avx2 ? sum_avx2(buf.data() + b, e - b) : sum_plain(buf.data() + b, e - b);
#else
      total += sum_plain(buf.data() + b, e - b);
#endif
    }
    best = std::max(best, n * 4.0 / (now_s() - t0) / 1e9);
    sink += total;
  }
  if (sink < 0) std::printf("?");
  return best;
}

double sgemm_peak_gflops(int threads) {
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  openblas_set_num_threads(threads);
  double best = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const double t0 = now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    if (rep) best = std::max(best, 2.0 * n * n * double(n) / (now_s() - t0) / 1e9);
  }
  openblas_set_num_threads(1);
  return best;
}

struct Shape {
  const char* name;
  int64_t n, k;
};
// The 125M Llama: hidden 768, GQA 12/4 (kv dim 256), intermediate 2048, vocab 32000. "up" (one of
// gate/up, 768 -> 2048) is only measured when named in --shapes: the model step counts gate_up.
Shape kShapes[] = {{"qkv", 1280, 768},  {"o_proj", 768, 768},     {"gate_up", 4096, 768},
                   {"down", 768, 2048}, {"lm_head", 32000, 768}, {"up", 2048, 768}, {"custom", 0, 0}};
bool in_model_step(const Shape& s) { return std::strcmp(s.name, "up") && std::strcmp(s.name, "custom"); }
constexpr int kLayers = 12;

// A pool of weight memory filled with finite values of one type; copies of a weight rotate in it.
struct Pool {
  static constexpr size_t kBytes = size_t(512) << 20;
  std::vector<unsigned char> mem = std::vector<unsigned char>(kBytes + 128);
  // Weights start at g_weight_offset bytes past a 64-byte boundary (--weight-offset; a checkpoint's
  // tensors sit wherever the safetensors header puts them).
  unsigned char* base() {
    const uintptr_t p = reinterpret_cast<uintptr_t>(mem.data());
    return mem.data() + ((64 - p % 64) % 64) + g_weight_offset;
  }
  DType filled = DType::I32;
  void fill(DType dtype) {
    if (filled == dtype) return;
    std::vector<unsigned char> pattern(1 << 16);
    for (size_t i = 0; i < pattern.size() / 4; ++i) {
      const float v = float(int(i * 2654435761u % 2001) - 1000) * 1e-3f;
      if (dtype == DType::F32) {
        std::memcpy(&pattern[4 * i], &v, 4);
      } else {
        const uint16_t a = dtype == DType::BF16 ? tpbatch::f32_to_bf16(v) : tpbatch::f32_to_f16(v);
        const uint16_t b = dtype == DType::BF16 ? tpbatch::f32_to_bf16(-v) : tpbatch::f32_to_f16(-v);
        std::memcpy(&pattern[4 * i], &a, 2);
        std::memcpy(&pattern[4 * i + 2], &b, 2);
      }
    }
    for (size_t off = 0; off < kBytes; off += pattern.size()) std::memcpy(&mem[off], pattern.data(), pattern.size());
    std::memcpy(&mem[kBytes], pattern.data(), 64);
    filled = dtype;
  }
};

// Seconds per call of f(weights) with the weights rotating over copies of `bytes` each.
template <class F>
double time_rotating(Pool& pool, size_t bytes, double min_seconds, F&& f) {
  const size_t stride = (bytes + 4095) / 4096 * 4096;
  const size_t copies =
      g_hot ? 1 : std::max<size_t>(2, std::min(Pool::kBytes / stride, (size_t(256) << 20) / stride + 1));
  size_t c = 0;
  unsigned char* base = pool.base();
  f(base);  // warm-up: thread team, scratch, page faults already taken by fill
  int reps = 0;
  const double t0 = now_s();
  double t = 0;
  while (reps < 3 || (t = now_s() - t0) < min_seconds) {
    c = (c + 1) % copies;
    f(base + c * stride);
    ++reps;
    t = now_s() - t0;
  }
  return t / reps;
}

struct Bounds {
  double read_gbps, peak_gflops;
};

struct Result {
  double seconds;
  std::string path;
};

// --instruction-rates: zmm vfmadd231ps (16 products) against vdpbf16ps (32 bf16 pair products) on
// 16 independent register chains each, the rates the bf16 kernel choice rests on (gemm.cpp's tables:
// on the Sapphire-Rapids-class Xeon vdpbf16ps retired at a quarter of the FMAs' rate, on a Zen 4 at
// the same rate, so twice the products).
int print_instruction_rates() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    std::printf("--instruction-rates: this CPU has no AVX512_BF16\n");
    return 0;
  }
  auto rate = [](float (*chains)(long, float)) {
    const long iters = 50000000;
    double best = 0, sink = 0;
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      sink += chains(iters, 0.5f);
      best = std::max(best, 16.0 * iters / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    if (sink == 12345) std::printf("?");
    return best / 1e9;
  };
  const double fma = rate(fma_chains_avx512), dot = rate(dpbf16_chains_avx512);
  std::printf("vfmadd231ps zmm %.2f G/s (%.1f G products/s), vdpbf16ps zmm %.2f G/s (%.1f G products/s): "
              "vdpbf16ps gives %.2fx the FMAs' products\n", fma, 16 * fma, dot, 32 * dot, 2 * dot / fma);
#else
  std::printf("--instruction-rates: x86-64 only\n");
#endif
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  tpbatch::ensure_fast_blas_core(argv);
  std::vector<int> thread_counts = {1, 2};
  std::vector<int> rows = {1, 2, 4, 8, 16, 32, 64, 128, 512};
  double min_seconds = 0.15;
  std::string only_shapes;  // ",qkv,down," when --shapes qkv,down
  std::string only_types;   // ",F32,OpenBLAS," when --types F32,OpenBLAS
  bool crossover = true;
  cpu::GemmPath forced_path = cpu::GemmPath::Auto;  // --path
  auto wanted = [&](const Shape& s) {
    return only_shapes.empty() ? in_model_step(s) : only_shapes.find(std::string(",") + s.name + ",") != std::string::npos;
  };
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) thread_counts = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rows")) rows = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--min-seconds")) min_seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--shapes")) only_shapes = std::string(",") + argv[i + 1] + ",";
    else if (!std::strcmp(argv[i], "--nk")) {  // --nk 128x768: one extra shape "custom" (n x k)
      kShapes[6].n = std::atoll(argv[i + 1]);
      kShapes[6].k = std::strchr(argv[i + 1], 'x') ? std::atoll(std::strchr(argv[i + 1], 'x') + 1) : 0;
      only_shapes = ",custom,";
    } else if (!std::strcmp(argv[i], "--types")) only_types = std::string(",") + argv[i + 1] + ",";
    else if (!std::strcmp(argv[i], "--crossover")) crossover = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--isa")) {  // a kernel family at or below the detected one
      if (!force_isa(argv[i + 1])) return 2;
    }
    else if (!std::strcmp(argv[i], "--instruction-rates")) return print_instruction_rates();
    else if (!std::strcmp(argv[i], "--clock")) g_cpu_clock = !std::strcmp(argv[i + 1], "cpu");
    else if (!std::strcmp(argv[i], "--hot")) g_hot = std::atoi(argv[i + 1]) != 0;
    else if (!std::strcmp(argv[i], "--weight-offset")) g_weight_offset = size_t(std::atoi(argv[i + 1])) % 64;
    else if (!std::strcmp(argv[i], "--path")) {  // force one path of gemm_nt in the main table
      bool known = false;
      for (cpu::GemmPath p : {cpu::GemmPath::Auto, cpu::GemmPath::RowBlocked, cpu::GemmPath::Broadcast,
                              cpu::GemmPath::Panel})
        if (!std::strcmp(argv[i + 1], cpu::gemm_path_name(p))) forced_path = p, known = true;
      if (!known) {
        std::fprintf(stderr, "--path: auto, row-blocked, broadcast or panel-sgemm, got %s\n", argv[i + 1]);
        return 2;
      }
    }
    else {
      std::fprintf(stderr, "usage: %s [--threads 1,2] [--rows 1,2,4] [--min-seconds S] [--clock wall|cpu]\n"
                 "       [--shapes qkv,o_proj,gate_up,down,lm_head,up] [--nk NxK] [--types F32,BF16,F16,OpenBLAS]\n"
                 "       [--crossover 0|1] [--isa portable|avx2-fma-f16c|avx512|avx512-bf16|amx-bf16] [--hot 0|1] [--weight-offset 0..63]\n"
                 "       [--path auto|row-blocked|broadcast|panel-sgemm] [--instruction-rates 1]\n", argv[0]);
      return 2;
    }
  }
  double load[3] = {};
  if (getloadavg(load, 3) < 1) load[0] = -1;
  std::printf("blas_core %s, gemm isa %s, OMP_WAIT_POLICY=%s, clock %s, weights %s, load average %.2f\n",
              tpbatch::blas_core_name(), cpu::gemm_isa_name(cpu::gemm_isa()),
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "", g_cpu_clock ? "cpu" : "wall",
              g_hot ? "hot (one copy)" : "streamed (rotating copies)", load[0]);
  Pool pool;
  int64_t max_mk = 0;
  for (const Shape& s : kShapes) max_mk = std::max(max_mk, s.k);
  const int max_m = *std::max_element(rows.begin(), rows.end());
  // Activations 64-byte aligned, as the backend's tensors are.
  std::vector<float> x_mem(size_t(max_m) * size_t(max_mk) + 16), y(size_t(max_m) * 32000);
  float* const x_data = x_mem.data() + (16 - reinterpret_cast<uintptr_t>(x_mem.data()) / 4 % 16) % 16;
  for (size_t i = 0; i < size_t(max_m) * size_t(max_mk); ++i) x_data[i] = float(int(i % 17) - 8) * 0.01f;
  struct {
    float* p;
    float* data() const { return p; }
  } x{x_data};

  const DType types[] = {DType::F32, DType::BF16, DType::F16};
  for (int threads : thread_counts) {
    g_clock_threads = threads;
    Bounds b{read_gbps(threads), sgemm_peak_gflops(threads)};
    std::printf("\n=== threads %d: read bandwidth %.2f GB/s, fp32 sgemm peak %.1f GFLOP/s ===\n", threads,
                b.read_gbps, b.peak_gflops);
    std::printf("%-8s %-5s %-9s %5s %11s %8s %8s %7s %7s %7s\n", "shape", "wtype", "kernel", "m", "us/call",
                "wGB/s", "GFLOP/s", "xBW", "xPeak", "x(m=1)");
    // step[type][m] = seconds of one step of the whole model (12 layers + LM head).
    std::map<std::string, std::map<int, double>> step;
    for (const Shape& s : kShapes) {
      if (!wanted(s)) continue;
      for (int impl = 0; impl < 4; ++impl) {  // 0..2: gemm_nt per type; 3: OpenBLAS on f32
        const DType dtype = impl < 3 ? types[impl] : DType::F32;
        const std::string label = impl < 3 ? tpbatch::dtype_name(dtype) : "F32";
        if (!only_types.empty() && only_types.find("," + (impl < 3 ? label : std::string("OpenBLAS")) + ",") ==
                                       std::string::npos)
          continue;
        pool.fill(dtype);
        const size_t bytes = size_t(s.n * s.k) * tpbatch::dtype_size(dtype);
        double t1 = 0;
        for (int m : rows) {
          std::string kernel;
          double t;
          if (impl < 3) {
            omp_set_num_threads(threads);
            kernel = cpu::gemm_path_name(forced_path == cpu::GemmPath::Auto
                                             ? cpu::gemm_auto_path(dtype, m, s.n, s.k) : forced_path);
            t = time_rotating(pool, bytes, min_seconds, [&](const unsigned char* w) {
              cpu::gemm_nt(x.data(), s.k, w, s.k, dtype, y.data(), s.n, m, s.n, s.k, forced_path);
            });
          } else {
            kernel = m == 1 ? "oblas-gemv" : "oblas-gemm";
            openblas_set_num_threads(threads);
            t = time_rotating(pool, bytes, min_seconds, [&](const unsigned char* wb) {
              const float* w = reinterpret_cast<const float*>(wb);
              if (m == 1)
                cblas_sgemv(CblasRowMajor, CblasNoTrans, int(s.n), int(s.k), 1.0f, w, int(s.k), x.data(), 1, 0.0f,
                            y.data(), 1);
              else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, int(s.n), int(s.k), 1.0f, x.data(),
                            int(s.k), w, int(s.k), 0.0f, y.data(), int(s.n));
            });
            openblas_set_num_threads(1);
          }
          if (m == rows.front()) t1 = t;
          const double gbps = bytes / t / 1e9, gflops = 2.0 * m * s.n * s.k / t / 1e9;
          std::printf("%-8s %-5s %-11s %3d %11.1f %8.2f %8.1f %7.2f %7.2f %7.2f\n", s.name, label.c_str(),
                      kernel.c_str(), m, t * 1e6, gbps, gflops, gbps / b.read_gbps, gflops / b.peak_gflops, t / t1);
          const std::string key = impl < 3 ? label : "F32/OpenBLAS";
          step[key][m] += (std::strcmp(s.name, "lm_head") ? kLayers : 1) * t;
        }
      }
    }
    if (!only_shapes.empty()) continue;
    // One decode/prefill step of the whole 125M model's linear layers (12 layers + LM head).
    std::printf("\n-- threads %d: linear layers of one model step (12 x {qkv,o,gate_up,down} + lm_head) --\n",
                threads);
    std::printf("%-13s %5s %10s %10s %8s %8s %8s\n", "weights", "m", "step ms", "rows/s", "wGB/s", "xBW",
                "x(m=1)");
    for (auto& [key, by_m] : step) {
      double bytes = 0;
      for (const Shape& s : kShapes)
        if (in_model_step(s))
          bytes += double(s.n * s.k) * (std::strcmp(s.name, "lm_head") ? kLayers : 1) *
                 (key == "BF16" || key == "F16" ? 2 : 4);
      for (auto& [m, sec] : by_m)
        std::printf("%-13s %5d %10.3f %10.1f %8.2f %8.2f %8.2f\n", key.c_str(), m, sec * 1e3, m / sec,
                    bytes / sec / 1e9, bytes / sec / 1e9 / b.read_gbps, sec / by_m.begin()->second);
    }
  }

  // Crossover between the three paths of gemm_nt, forced, on the biggest layer shapes.
  if (!crossover) return 0;
  std::printf("\n-- crossover: us/call of each path of gemm_nt (threads %d) --\n", thread_counts.back());
  std::printf("%-8s %-5s %5s %12s %12s %12s\n", "shape", "wtype", "m", "row-blocked", "broadcast", "panel-sgemm");
  omp_set_num_threads(thread_counts.back());
  g_clock_threads = thread_counts.back();
  for (const Shape& s : {kShapes[2], kShapes[3]})
    for (DType dtype : types) {
      pool.fill(dtype);
      const size_t bytes = size_t(s.n * s.k) * tpbatch::dtype_size(dtype);
      for (int m : {16, 24, 32, 48, 64, 96, 128}) {
        if (m > max_m) continue;
        double t[3];
        const cpu::GemmPath paths[3] = {cpu::GemmPath::RowBlocked, cpu::GemmPath::Broadcast, cpu::GemmPath::Panel};
        for (int p = 0; p < 3; ++p) {
          const cpu::GemmPath path = paths[p];
          t[p] = time_rotating(pool, bytes, min_seconds, [&](const unsigned char* w) {
            cpu::gemm_nt(x.data(), s.k, w, s.k, dtype, y.data(), s.n, m, s.n, s.k, path);
          });
        }
        std::printf("%-8s %-5s %5d %12.1f %12.1f %12.1f\n", s.name, tpbatch::dtype_name(dtype), m, t[0] * 1e6,
                    t[1] * 1e6, t[2] * 1e6);
      }
    }
  return 0;
}
