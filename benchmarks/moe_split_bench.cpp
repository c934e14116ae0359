// parallel.experts, tensor vs expert: the MoE block's time per step on each
// tensor-parallel rank, measured rank by rank in one process (one thread, as each rank of a run has
// its core), so the ranks do not compete with each other; a step takes as long as its slowest rank
// (the allreduce waits for it). Times are the thread's CPU time, so preemption on a busy machine
// does not count (memory-bandwidth contention still does). Repeats interleave the two splits and report medians, and the
// expert/tensor ratio per repeat (paired), so a busy machine slows both alike. Communication is the same under both splits (one allreduce per MoE layer) and is left out.
// Also prints the routing's imbalance (tokens on the busiest rank / the mean, under the expert
// split) and the expert weight bytes the busiest rank reads per step.
// Usage: tpbatch_moe_split_bench MODEL_DIR [TENSOR=2] [ROWS=1,2,8,32,256,2048] [REPEATS=21]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/config.h"
#include "model/llama_shard.h"
#include "comm/one_rank_communicator.h"
#include "model/moe.h"
#include "model/safetensors.h"
#include "model/shard_placement.h"

using namespace tpbatch;

// This thread's CPU time: the time a rank computes, without the time a busy machine preempts it
// (OpenBLAS and OpenMP run on the calling thread at one thread).
double thread_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) * 1e-6;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [TENSOR=2] [ROWS=1,2,8,32,256,2048] [REPEATS=21]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int tensor = argc > 2 ? std::stoi(argv[2]) : 2;
  std::vector<int64_t> row_counts;
  std::stringstream rs(argc > 3 ? argv[3] : "1,2,8,32,256,2048");
  for (std::string x; std::getline(rs, x, ',');) row_counts.push_back(std::stoll(x));
  const int repeats = argc > 4 ? std::stoi(argv[4]) : 21;
  openblas_set_num_threads(1);
  omp_set_num_threads(1);

  const ModelConfig cfg = load_model_config(dir);
  const WeightStore ws = WeightStore::open(dir);
  auto be = make_cpu_backend();
  const int64_t H = cfg.hidden_size;
  const int64_t expert_bytes = 3 * cfg.expert_intermediate_size * H * 4;  // one whole expert, F32
  std::printf("%s: %lld experts of width %lld, top-%lld, hidden %lld, %lld layers; TP=%d, F32, 1 thread per rank, "
              "median of %d\n",
              dir.c_str(), (long long)cfg.num_experts, (long long)cfg.expert_intermediate_size,
              (long long)cfg.experts_per_token, (long long)H, (long long)cfg.num_layers, tensor, repeats);
  std::printf("step = the slowest rank's CPU time over the MoE layers, ms (min and median of the repeats); exp/ten = expert\n"
              "over tensor, of the mins and the median of the paired ratios; imbalance = tokens on the busiest rank / mean\n"
              "(expert split); MiB = expert weights the most-reading rank touches per step, tensor / expert\n");
  std::printf("%6s | %-19s | %-19s | %-15s | %9s | %-17s\n", "rows", "tensor min  median", "expert min  median",
              "exp/ten min med", "imbalance", "MiB ten / exp");

  std::vector<LlamaShard> shards[2];
  for (int s = 0; s < 2; ++s)
    for (int r = 0; r < tensor; ++r)
      shards[s].push_back(load_llama_shard(
          cfg, ws, shard_placement(cfg, tensor, /*pipeline=*/1, 0, r, s ? ExpertSplit::kExpert : ExpertSplit::kTensor),
          *be, DType::F32));
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  for (int64_t rows : row_counts) {
    std::vector<float> hx(static_cast<size_t>(rows * H));
    for (float& v : hx) v = nd(rng);
    Buffer h = be->alloc(hx.size(), DType::F32), out = be->alloc(hx.size(), DType::F32);
    be->upload(h.view(), hx.data(), hx.size() * 4);
    std::vector<MoeBlock> blocks[2];
    OneRankCommunicator lone(*be);  // each simulated rank's partial output, as before its allreduce
    for (int s = 0; s < 2; ++s) blocks[s].resize(size_t(tensor));
    // Repeats interleave the splits (and ranks), so both see the same machine; each repeat's step is
    // its slowest rank's time over the MoE layers; the ratio is taken per repeat (paired).
    std::vector<double> step[2], ratio;
    for (int k = 0; k < repeats + 1; ++k) {  // repeat 0 sizes the scratch
      double this_step[2] = {0, 0};
      for (int s = 0; s < 2; ++s)
        for (int r = 0; r < tensor; ++r) {
          const LlamaShard& sh = shards[s][size_t(r)];
          double ms = 0;
          for (size_t l = 0; l < sh.layers.size(); ++l) {
            if (!sh.layers[l].is_moe()) continue;
            const double t0 = thread_cpu_ms();
            blocks[s][size_t(r)].forward(*be, lone, sh, sh.layers[l], h.view(), rows, out.view());
            ms += thread_cpu_ms() - t0;
          }
          this_step[s] = std::max(this_step[s], ms);
        }
      if (k == 0) continue;
      for (int s = 0; s < 2; ++s) step[s].push_back(this_step[s]);
      ratio.push_back(this_step[1] / this_step[0]);
    }
    // Expert bytes the slowest-reading rank touches per step (the routing is the same every repeat).
    double mib[2] = {0, 0};
    for (int s = 0; s < 2; ++s)
      for (int r = 0; r < tensor; ++r) {
        const LlamaShard& sh = shards[s][size_t(r)];
        double m = 0;
        for (size_t l = 0; l < sh.layers.size(); ++l) {
          if (!sh.layers[l].is_moe()) continue;
          MoeBlock one;
          one.forward(*be, lone, sh, sh.layers[l], h.view(), rows, out.view());
          const MoeRouting& rt = one.last_routing();
          for (int64_t e = sh.expert_range.begin; e < sh.expert_range.end; ++e)
            if (rt.expert_begin[size_t(e + 1)] > rt.expert_begin[size_t(e)])
              m += double(expert_bytes) * double(sh.expert_inter) / double(cfg.expert_intermediate_size) / (1 << 20);
        }
        mib[s] = std::max(mib[s], m);
      }
    const MoeLoad& load = blocks[1][0].load();
    auto least = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
    std::printf("%6lld | %9.3f %9.3f | %9.3f %9.3f | %7.2f %7.2f | %9.3f | %7.1f / %7.1f\n", (long long)rows,
                least(step[0]), median(step[0]), least(step[1]), median(step[1]), least(step[1]) / least(step[0]),
                median(ratio), load.sum_max_rank_slots / load.sum_mean_rank_slots, mib[0], mib[1]);
  }
  return 0;
}
