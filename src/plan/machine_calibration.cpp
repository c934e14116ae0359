#include "plan/machine_calibration.h"

#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "backend/cpu/gemm.h"

namespace tpbatch {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double measure_memory_gbs() {
  const size_t n = (size_t{256} << 20) / sizeof(float);
  std::vector<float> buf(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023);
  double best = 1e30;
  volatile float sink = 0.0f;
  for (int rep = 0; rep < 6; ++rep) {
    const double t0 = now_s();
    float sum = 0.0f;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (size_t i = 0; i < n; ++i) sum += buf[i];
    const double t = now_s() - t0;
    sink = sink + sum;
    if (rep > 0) best = std::min(best, t);  // the first pass warms the pages and caches
  }
  return static_cast<double>(n * sizeof(float)) / best / 1e9;
}

// Best FLOP/s of y = x · w^T at m x n x k, fp32.
double measure_gemm_flops(int64_t m, int64_t n, int64_t k, int reps) {
  std::vector<float> x(static_cast<size_t>(m * k), 0.5f), w(static_cast<size_t>(n * k), 0.25f),
      y(static_cast<size_t>(m * n));
  cpu::gemm_nt(x.data(), w.data(), DType::F32, y.data(), m, n, k);  // warm-up
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    cpu::gemm_nt(x.data(), w.data(), DType::F32, y.data(), m, n, k);
    best = std::min(best, now_s() - t0);
  }
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) / best;
}

// Best seconds of one MPI_Allreduce of `floats` floats, over `reps` after a warm-up.
double allreduce_seconds(int floats, int reps) {
  std::vector<float> in(static_cast<size_t>(floats), 1.0f), out(static_cast<size_t>(floats));
  MPI_Allreduce(in.data(), out.data(), floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    MPI_Allreduce(in.data(), out.data(), floats, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t = MPI_Wtime() - t0, slowest = 0.0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);  // the step waits for the last rank
    best = std::min(best, slowest);
  }
  return best;
}

}  // namespace

int launched_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  return 1;
}

Calibration calibrate_machine(bool measure_memory, bool measure_gemm) {
  Calibration c;
  if (launched_world_size() >= 2) {
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
    MPI_Finalize();
    if (c.mpi_rank != 0) return c;
  }
  c.gemm_threads = omp_get_max_threads();
  if (measure_memory) c.memory_gbs = measure_memory_gbs();
  if (measure_gemm) {
    const double peak = measure_gemm_flops(512, 2048, 2048, 3);
    const double decode = measure_gemm_flops(32, 2048, 768, 20);
    c.gemm_tflops = peak / 1e12;
    c.gemm_decode_tflops = decode / 1e12;
    c.gemm_half_rows = decode < peak ? 32.0 * (peak / decode - 1.0) : 0.0;
  }
  return c;
}

}  // namespace tpbatch
