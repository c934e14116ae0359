// The whole model on the CUDA backend against the CPU backend: stories260K (the real tiny Llama)
// through ModelRunner on both, a prompt's prefill then greedy decode steps, each step's tokens
// fed to both (the CPU's choice). Greedy tokens must agree (up to near-ties, within 0.1 in logit)
// and the log-probability of every chosen token within 0.15 (bf16 activations and KV cache
// against fp32; a bf16 KV cache alone moves stories260K's log-probabilities by ~0.03). Weights:
// the checkpoint's F32 (TF32 GEMMs on CUDA) and bf16. Skips without a GPU or stories260K.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "comm/one_rank_communicator.h"
#include "model/config.h"
#include "model/llama_shard.h"
#include "model/model_runner.h"
#include "model/safetensors.h"
#include "model/step_inputs.h"

namespace tpbatch {
namespace {

// stories260K: the repository's copy (models/, which travels with the working tree); empty when
// absent.
std::filesystem::path stories_model() {
  std::vector<std::filesystem::path> roots;
  if (const char* dir = std::getenv("TPBATCH_SOURCE_DIR")) roots.emplace_back(dir);
  roots.emplace_back(TPBATCH_SOURCE_DIR);
  for (const auto& root : roots) {
    const std::filesystem::path model = root / "models/stories260K";
    if (std::filesystem::exists(model / "config.json") && std::filesystem::exists(model / "model.safetensors")) return model;
  }
  return {};
}

struct Engine {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<OneRankCommunicator> comm;
  std::unique_ptr<ModelRunner> runner;
};

Engine make_engine(std::unique_ptr<Backend> be, const ModelConfig& cfg, const WeightStore& weights, DType wt,
                   DType kv_dtype) {
  Engine e;
  e.backend = std::move(be);
  e.comm = std::make_unique<OneRankCommunicator>(*e.backend);
  ShardPlacement place;
  place.layers = {0, cfg.num_layers};
  LlamaShard shard = load_llama_shard(cfg, weights, place, *e.backend, wt);
  KvLayout kv;
  kv.num_blocks = 64;
  kv.block_size = 16;
  kv.dtype = kv_dtype;
  e.runner = std::make_unique<ModelRunner>(std::move(shard), *e.backend, *e.comm, kv);
  return e;
}

// Two sequences: a prompt of `prompt` tokens each (different tokens), prefilled in one step,
// then decoded greedily for `steps` steps, both in every step.
void run_and_compare(const ModelConfig& cfg, const WeightStore& weights, DType wt, DType kv_dtype) {
  Engine cpu = make_engine(make_cpu_backend(), cfg, weights, wt, DType::F32);
  Engine gpu = make_engine(make_cuda_backend(0), cfg, weights, wt, kv_dtype);
  const int64_t prompt = 40, steps = 24, nseq = 2, blocks_per_seq = 8;
  std::vector<std::vector<int32_t>> tokens(nseq);
  for (int64_t s = 0; s < nseq; ++s)
    for (int64_t i = 0; i < prompt; ++i) tokens[s].push_back(static_cast<int32_t>((7 + 13 * i + 101 * s) % cfg.vocab_size));
  double worst = 0;
  int mismatches = 0, hard_mismatches = 0;
  for (int64_t step = 0; step <= steps; ++step) {
    StepInputs in;
    for (int64_t s = 0; s < nseq; ++s) {
      const int64_t len = static_cast<int64_t>(tokens[s].size());
      const int64_t first = step == 0 ? 0 : len - 1;  // prefill the prompt, then one token a step
      StepSeqSlice slice;
      slice.num_rows = len - first;
      slice.pos_begin = first;
      slice.blocks_begin = static_cast<int64_t>(in.block_ids.size());
      slice.num_blocks = blocks_per_seq;
      for (int64_t b = 0; b < blocks_per_seq; ++b) in.block_ids.push_back(static_cast<int32_t>(s * blocks_per_seq + b));
      for (int64_t p = first; p < len; ++p) {
        in.tokens.push_back(tokens[s][p]);
        in.positions.push_back(static_cast<int32_t>(p));
      }
      in.seqs.push_back(slice);
      in.logits.push_back({in.rows() - 1, -1, false});
    }
    std::vector<LogitResult> rc, rg;
    std::vector<float> fc, fg;
    cpu.runner->step(in, rc, fc);
    ASSERT_EQ(rc.size(), static_cast<size_t>(nseq));
    for (int64_t s = 0; s < nseq; ++s) in.logits[s].target = rc[s].argmax;  // the GPU reports the CPU's token
    gpu.runner->step(in, rg, fg);
    ASSERT_EQ(rg.size(), static_cast<size_t>(nseq));
    for (int64_t s = 0; s < nseq; ++s) {
      // log p(CPU's greedy token) on both backends.
      const double lp_cpu = double(rc[s].max_logit) - rc[s].log_z, lp_gpu = double(rg[s].target_logit) - rg[s].log_z;
      worst = std::max(worst, std::abs(lp_cpu - lp_gpu));
      if (rg[s].argmax != rc[s].argmax) {
        ++mismatches;
        // A near-tie may flip under bf16; anything else is a bug.
        if (rg[s].max_logit - rg[s].target_logit > 0.1f) ++hard_mismatches;
      }
      tokens[s].push_back(rc[s].argmax);
    }
  }
  std::printf("%s weights, %s KV: greedy tokens %d/%d equal, max |d logprob| %.4f\n", dtype_name(wt),
              dtype_name(kv_dtype), int((steps + 1) * nseq) - mismatches, int((steps + 1) * nseq), worst);
  EXPECT_EQ(hard_mismatches, 0) << "tokens differing by more than a near-tie";
  EXPECT_LT(worst, 0.15);
}

class CudaModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
    model_ = stories_model();
    if (model_.empty()) GTEST_FAIL() << "models/stories260K is missing from the clone (" TPBATCH_SOURCE_DIR ")";
  }
  std::filesystem::path model_;
};

TEST_F(CudaModel, Stories260KGreedyDecodeMatchesCpuWithF32Weights) {
  const ModelConfig cfg = load_model_config(model_);
  const WeightStore weights = WeightStore::open(model_);
  run_and_compare(cfg, weights, DType::F32, DType::BF16);
}

TEST_F(CudaModel, Stories260KGreedyDecodeMatchesCpuWithBf16WeightsAndF32Cache) {
  const ModelConfig cfg = load_model_config(model_);
  const WeightStore weights = WeightStore::open(model_);
  run_and_compare(cfg, weights, DType::BF16, DType::F32);
}

}  // namespace
}  // namespace tpbatch
