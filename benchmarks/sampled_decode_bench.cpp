// A decode step of the engine (ModelRunner::step, then OutputProcessor::process: the LM head, the full
// logits to the host, the token choice) for ROWS rows that sample against the same rows decoding
// greedily, in one process: two runners on the same weights, stepped in turn, so each pair of steps
// meets the same machine; the ratio is taken per pair and the median reported (and the ratio of
// the fastest steps). Wall clock, the step's threads as a run's rank has them (all CPUs).
// Usage: tpbatch_sampled_decode_bench MODEL_DIR [ROWS=64] [PAIRS=40]
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/gemm/blas_core.h"
#include "comm/one_rank_communicator.h"
#include "engine/kv_block_allocator.h"
#include "engine/output_processor.h"
#include "engine/scheduler.h"
#include "model/config.h"
#include "model/llama_shard.h"
#include "model/model_runner.h"
#include "model/safetensors.h"
#include "model/shard_placement.h"

using namespace tpbatch;

namespace {

// A runner with its own KV cache and scheduler, its rows all sampling with `params`.
struct Lane {
  Lane(const ModelConfig& cfg, const WeightStore& ws, Backend& be, Communicator& tp, int64_t rows,
       const SamplingParams& params)
      : runner(load_llama_shard(cfg, ws, shard_placement(cfg, /*tensor=*/1, /*pipeline=*/1, 0, 0, ExpertSplit::kTensor), be, DType::F32), be, tp,
               KvLayout{.num_blocks = rows * 16, .block_size = 16}),
        alloc(rows * 16, 16),
        sched(SchedulerLimits{.max_seqs = rows, .max_batch_tokens = 4096, .backend_draws = true}, alloc) {
    runner.set_host_draw(draw_on_host);  // the sampled rows' tokens are drawn in runner.step
    for (int64_t r = 0; r < rows; ++r) {
      auto s = std::make_unique<Sequence>();
      s->row = s->line = r;
      for (int64_t i = 0; i < 12; ++i) s->tokens.push_back(static_cast<int32_t>((r * 131 + i * 17) % cfg.vocab_size));
      s->prompt_len = static_cast<int64_t>(s->tokens.size());
      s->max_len = 16 * 16;  // never reached here
      s->sampling = params;
      s->sampling.seed = 3;
      sched.add(std::move(s));
    }
  }
  double step_ms() {
    const auto t0 = std::chrono::steady_clock::now();
    const StepInputs in = sched.schedule();
    runner.step(in, out.results, out.full_logits);
    const auto t1 = std::chrono::steady_clock::now();
    const std::vector<StepChunk> done = sched.complete_step();
    output.process(done, out, runner.shard().config.vocab_size, 0);
    sched.update(done);
    const auto t2 = std::chrono::steady_clock::now();
    apply_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
    return std::chrono::duration<double, std::milli>(t2 - t0).count();
  }
  double apply_ms = 0;  // of the last step: the token choice (OutputProcessor::process)
  ModelRunner runner;
  KvBlockAllocator alloc;
  Scheduler sched;
  StepResults out;
  OutputProcessor output;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [ROWS=64] [PAIRS=40]\n", argv[0]);
    return 2;
  }
  ensure_fast_blas_core(argv);  // OpenBLAS core and OpenMP wait policy as tpbatch runs (re-exec)
  const std::string dir = argv[1];
  const int64_t rows = argc > 2 ? std::stoll(argv[2]) : 64;
  const int pairs = argc > 3 ? std::stoi(argv[3]) : 40;
  openblas_set_num_threads(omp_get_max_threads());
  const ModelConfig cfg = load_model_config(dir);
  const WeightStore ws = WeightStore::open(dir);
  auto be = make_cpu_backend();
  OneRankCommunicator tp(*be);
  SamplingParams greedy, temp, nucleus;
  temp.temperature = nucleus.temperature = 0.8;
  nucleus.top_p = 0.9;
  nucleus.top_k = 50;
  std::printf("%s: vocabulary %lld, hidden %lld, %lld layers; %lld rows decoding, %d OpenMP threads, %d pairs\n",
              dir.c_str(), (long long)cfg.vocab_size, (long long)cfg.hidden_size, (long long)cfg.num_layers,
              (long long)rows, omp_get_max_threads(), pairs);
  std::printf("%-36s | %8s | %9s | %12s | %10s | %s\n", "sampled", "step ms", "greedy ms", "ratio median",
              "best ratio", "choice ms, sampled / greedy (OutputProcessor::process)");
  const std::pair<const char*, const SamplingParams*> cases[] = {{"temperature 0.8", &temp},
                                                                 {"temperature 0.8, top_p 0.9, top_k 50", &nucleus}};
  for (const auto& [name, params] : cases) {
    Lane g(cfg, ws, *be, tp, rows, greedy), s(cfg, ws, *be, tp, rows, *params);
    g.step_ms(), s.step_ms();  // the prompts
    g.step_ms(), s.step_ms();  // the first decode step sizes the scratch
    std::vector<double> gm, sm, ratio, g_apply, s_apply;
    for (int k = 0; k < pairs; ++k) {
      gm.push_back(g.step_ms());
      sm.push_back(s.step_ms());
      ratio.push_back(sm.back() / gm.back());
      g_apply.push_back(g.apply_ms), s_apply.push_back(s.apply_ms);
    }
    std::printf("%-36s | %8.2f | %9.2f | %11.2fx | %9.2fx | %6.2f / %5.2f\n", name, median(sm), median(gm),
                median(ratio), *std::min_element(sm.begin(), sm.end()) / *std::min_element(gm.begin(), gm.end()),
                median(s_apply), median(g_apply));
  }
  return 0;
}
