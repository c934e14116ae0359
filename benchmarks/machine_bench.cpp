// Measures this machine's bounds for the engine benchmarks: fp32 GEMM rate through the same BLAS
// (and core selection) the CPU backend uses, and memory read bandwidth, on `threads` threads.
//   tpbatch_machine_bench [--threads N]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "backend/cpu/gemm/blas_core.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double gemm_gflops(int n) {
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::max(best, 2.0 * n * n * double(n) / seconds_since(t0) / 1e9);
  }
  return best;
}

double read_gbps(int threads) {
  const size_t n = size_t(1) << 28;  // 1 GiB of floats
  std::vector<float> buf(n, 1.0f);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    std::vector<double> sums(threads);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        const size_t b = n * t / threads, e = n * (t + 1) / threads;
        float acc[16] = {};
        for (size_t i = b; i + 16 <= e; i += 16)
          for (int j = 0; j < 16; ++j) acc[j] += buf[i + j];
        sums[t] = std::accumulate(acc, acc + 16, 0.0);
      });
    for (auto& th : pool) th.join();
    const double s = seconds_since(t0);
    if (sums[0] < 0) std::printf("?");
    best = std::max(best, n * sizeof(float) / s / 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  tpbatch::ensure_fast_blas_core(argv);
  int threads = static_cast<int>(std::thread::hardware_concurrency());
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  openblas_set_num_threads(threads);
  std::printf("blas_core %s\n", tpbatch::blas_core_name());
  std::printf("threads %d\n", threads);
  std::printf("gemm_gflops %.1f\n", gemm_gflops(2048));
  std::printf("read_gbps %.2f\n", read_gbps(threads));
  return 0;
}
