// tpbatch_allreduce_bench: allreduce latency and bandwidth, in the spirit of nccl-tests'
// all_reduce_perf, then a fit of the alpha-beta model `tpbatch plan` uses:
//
//   T(S) ~= alpha + 2 (t-1)/t x S / B        (ring allreduce; B = bus bandwidth)
//
//   mpirun -np 2 tpbatch_allreduce_bench [--min-bytes 8] [--max-bytes 64M] [--step 2]
//                                        [--warmup 5] [--iters 20] [--trials 3] [--communicator]
//
// For each size: time per call (average over iterations, slowest rank, fastest of --trials loops), algbw = S / T and
// busbw = algbw x 2(t-1)/t, as nccl-tests reports them; the fitted model's prediction and the
// measured/predicted ratio. The fit minimizes relative error (weighted least squares with weights
// 1/T^2), so small messages (alpha) and large ones (B) both count.
// --communicator routes the calls through the engine's data-plane Communicator (MPI, on CPU
// backend memory, in place, as the engine calls it) instead of a plain out-of-place MPI_Allreduce.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/mpi_tensor_communicator.h"

namespace {

struct Options {
  int64_t min_bytes = 8;
  int64_t max_bytes = int64_t{64} << 20;
  int64_t step = 2;
  int warmup = 5;
  int iters = 20;
  int trials = 3;  // timed loops per size; the fastest counts (robust to a busy machine)
  bool communicator = false;
};

int64_t parse_size(const std::string& s) {
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  const std::string unit = end ? std::string(end) : "";
  if (unit == "K" || unit == "k") v *= 1024;
  else if (unit == "M" || unit == "m") v *= 1024 * 1024;
  else if (unit == "G" || unit == "g") v *= 1024.0 * 1024 * 1024;
  else if (!unit.empty()) return -1;
  return static_cast<int64_t>(v);
}

bool parse(int argc, char** argv, Options& o, int rank) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--min-bytes") o.min_bytes = parse_size(next());
    else if (a == "--max-bytes") o.max_bytes = parse_size(next());
    else if (a == "--step") o.step = std::atoll(next().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(next().c_str());
    else if (a == "--iters") o.iters = std::atoi(next().c_str());
    else if (a == "--trials") o.trials = std::atoi(next().c_str());
    else if (a == "--communicator") o.communicator = true;
    else {
      if (rank == 0)
        std::fprintf(stderr,
                     "usage: tpbatch_allreduce_bench [--min-bytes N[K|M]] [--max-bytes N[K|M]] [--step F] "
                     "[--warmup N] [--iters N] [--trials N] [--communicator]\n");
      return false;
    }
  }
  if (o.min_bytes < 4 || o.max_bytes < o.min_bytes || o.step < 2 || o.warmup < 0 || o.iters < 1 || o.trials < 1) {
    if (rank == 0) std::fprintf(stderr, "tpbatch_allreduce_bench: bad option values\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, t = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &t);
  Options o;
  if (!parse(argc, argv, o, rank)) {
    MPI_Finalize();
    return 2;
  }
  const std::unique_ptr<tpbatch::Backend> backend = tpbatch::make_cpu_backend();
  tpbatch::MpiTensorCommunicator comm(MPI_COMM_WORLD, *backend);

  const size_t max_count = static_cast<size_t>(o.max_bytes / 4);
  std::vector<float> send(max_count), recv(max_count);
  for (size_t i = 0; i < max_count; ++i) send[i] = static_cast<float>(rank + 1) + static_cast<float>(i % 7);

  // Correctness once, at the largest size.
  {
    MPI_Allreduce(send.data(), recv.data(), static_cast<int>(max_count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    int bad = 0;
    for (size_t i = 0; i < max_count; i += 997) {
      const float want = static_cast<float>(t) * (t + 1) / 2 + static_cast<float>(t) * static_cast<float>(i % 7);
      if (recv[i] != want) bad = 1;
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any) {
      if (rank == 0) std::fprintf(stderr, "tpbatch_allreduce_bench: wrong allreduce result\n");
      MPI_Finalize();
      return 1;
    }
  }
  std::fill(recv.begin(), recv.end(), 0.0f);  // in-place runs sum zeros: no overflow over iterations

  const double factor = t > 1 ? 2.0 * (t - 1) / t : 0.0;
  std::vector<double> sizes, times;
  for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.step) {
    const int count = static_cast<int>(bytes / 4);
    auto once = [&] {
      if (o.communicator) comm.allreduce_sum(tpbatch::BufferView{recv.data(), tpbatch::DType::F32}, static_cast<size_t>(count));
      else MPI_Allreduce(send.data(), recv.data(), count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    for (int i = 0; i < o.warmup; ++i) once();
    double best = 0;
    for (int trial = 0; trial < o.trials; ++trial) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double t0 = MPI_Wtime();
      for (int i = 0; i < o.iters; ++i) once();
      double per_call = (MPI_Wtime() - t0) / o.iters, slowest = 0;
      MPI_Allreduce(&per_call, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      best = trial == 0 ? slowest : std::min(best, slowest);
    }
    const double slowest = best;
    sizes.push_back(static_cast<double>(count) * 4);
    times.push_back(slowest * 1e6);
  }

  // Weighted least squares for T = alpha + beta x, x = factor x S, weights 1/T^2; B = 1/beta.
  double alpha = 0, beta = 0;
  {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const double w = 1.0 / (times[i] * times[i]), x = factor * sizes[i], y = times[i];
      sw += w, sx += w * x, sy += w * y, sxx += w * x * x, sxy += w * x * y;
    }
    const double det = sw * sxx - sx * sx;
    if (det > 0) {
      beta = (sw * sxy - sx * sy) / det;
      alpha = (sy - beta * sx) / sw;
    } else {
      alpha = sy / sw;
    }
    if (alpha < 0) {  // refit the slope alone through the origin
      alpha = 0;
      beta = sxx > 0 ? sxy / sxx : 0;
    }
  }
  const double bus_gbs = beta > 0 ? 1e-3 / beta : 0;  // beta in us per byte -> GB/s (1e9 B/s)

  if (rank == 0) {
    std::printf("# tpbatch_allreduce_bench: %d ranks, float sum, %s, warmup %d, iters %d, best of %d trials\n", t,
                o.communicator ? "MpiGroup::allreduce_sum (in place)" : "MPI_Allreduce (out of place)",
                o.warmup, o.iters, o.trials);
    std::printf("# %12s %12s %12s %10s %10s %12s %8s\n", "size(B)", "count", "time(us)", "algbw", "busbw",
                "model(us)", "ratio");
    std::printf("# %12s %12s %12s %10s %10s %12s %8s\n", "", "(float)", "", "(GB/s)", "(GB/s)", "", "meas/model");
    for (size_t i = 0; i < sizes.size(); ++i) {
      const double algbw = sizes[i] / (times[i] * 1e3);  // bytes/us / 1e3 = GB/s
      const double model = alpha + beta * factor * sizes[i];
      std::printf("  %12.0f %12.0f %12.2f %10.3f %10.3f %12.2f %8.2f\n", sizes[i], sizes[i] / 4, times[i], algbw,
                  algbw * factor, model, model > 0 ? times[i] / model : 0.0);
    }
    std::printf("# fit: T = alpha + 2(t-1)/t * S / B  (relative least squares over %zu sizes)\n", sizes.size());
    std::printf("# alpha_us %.3f\n# bandwidth_gbs %.3f\n", alpha, bus_gbs);
    std::printf("# tpbatch plan ... --alpha-us %.2f --bandwidth-gbs %.2f\n", alpha, bus_gbs);
  }
  MPI_Finalize();
  return 0;
}
