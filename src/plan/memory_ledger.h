#pragma once
// `tpbatch plan`: the per-rank memory ledger of every legal (tensor, pipeline) layout, from the
// model's config.json alone (no weights, no MPI). Pure arithmetic, unit-tested against
// hand-computed ledgers.
//
// The model, for one rank of a layout (TP = tensor, PP = pipeline):
//   dtypes              weights in the weight dtype (the job's dtype; auto: the checkpoint's storage
//                       dtype, or config.json's torch_dtype when there are no weights), norms and
//                       biases in float32, as the run keeps them; the KV cache in engine.kv_cache_dtype
//                       (auto: float32 on the CPU backend, bfloat16 on CUDA); activations (for the
//                       allreduce model) float32 on the CPU, bfloat16 on CUDA.
//   weights             shard_weight_bytes() of that rank (its layers, its head/intermediate/vocab
//                       shards, replicated KV heads when TP > KV heads, embedding on the first stage,
//                       final norm and LM head on the last; tied embeddings with PP > 1 cost the last
//                       stage its own copy of the vocab shard) — the formula the run's
//                       "weights: X MiB per rank" line agrees with.
//   KV bytes per token  kv_bytes_per_token_of_rank(): 2 (K and V) x local KV heads x head_dim x KV
//                       dtype bytes x the stage's layers (stops shrinking once TP exceeds the KV
//                       heads: heads are replicated) — the same function ModelRunner sizes with.
//   reserved            activation/workspace estimate (see reserved_bytes_per_rank), plus a fixed
//                       device context (1 GiB) and, for a quantized checkpoint, the CUDA backend's
//                       BF16 dequantize scratch when an accelerator's memory was given; for
//                       mixture-of-experts models also the MoE block's scratch at max_batch_tokens
//                       (model/moe.h's moe_scratch: router logits, gathered rows, expert
//                       gate/up/act/outputs, under the job's parallel.experts) and, on the CPU, its
//                       host routing buffers.
//   KV tokens           floor((device memory x memory_utilization - weights - reserved) / KV bytes per
//                       token), the minimum over the ranks of the layout (0 when negative).
//   fits                KV tokens >= one row of the job's length (row_tokens).
//   concurrent rows     KV tokens / row_tokens: rows a replica can hold at once.
//   allreduce time      alpha-beta model per decode step of one stage: 2 allreduces per layer of
//                       S = max_seqs x hidden x activation bytes each, ring cost alpha + 2(t-1)/t x S / B.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/dtype.h"
#include "job/job_spec.h"
#include "model/config.h"
#include "topology/layout.h"

namespace tpbatch {

// Defaults of the alpha-beta allreduce model.
// PlanInputs' own (a ledger built without `plan`): NVLink alpha 8 us, B 150 GB/s. `tpbatch plan`
// takes an accelerator's from --preset, else from kDefaultAcceleratorPreset (plan/hardware_presets.h).
inline constexpr double kNvlinkAlphaUs = 8.0;
inline constexpr double kNvlinkBusBandwidthGBs = 150.0;
// CPU backend: Open MPI shared-memory allreduce between two ranks of one node, as fitted by
// scripts/bench_allreduce.sh (benchmarks/allreduce_bench.cpp) on the 2-core development machine
// (alpha 0.51-0.53 us, B 0.91-1.39 GB/s). Rerun it on the target machine and pass
// --alpha-us / --bandwidth-gbs.
inline constexpr double kCpuAlphaUs = 0.5;
inline constexpr double kCpuBusBandwidthGBs = 1.0;

// Device context (CUDA context, cuBLAS/NCCL workspaces) reserved per rank when a device memory
// size is given.
inline constexpr int64_t kDeviceContextBytes = int64_t{1} << 30;
// Slack on the activation estimate (allocator rounding, temporaries the estimate does not list).
inline constexpr double kWorkspaceFactor = 2.0;

struct PlanInputs {
  int world_size = 1;
  int ranks_per_node = 1;               // a TP group must fit in a node
  int64_t device_memory_bytes = 0;      // per rank
  bool accelerator = false;             // CUDA: reserve kDeviceContextBytes per rank
  DType weight_dtype = DType::BF16;     // linear layers and embeddings (norms and biases are F32)
  DType kv_dtype = DType::BF16;         // the KV cache
  DType activation_dtype = DType::BF16; // what the TP allreduces carry
  double memory_utilization = 0.90;
  int64_t max_batch_tokens = 4096;
  int64_t max_seqs = 64;
  int64_t row_tokens = 1152;            // one row of the job: prompt + max_new_tokens
  double alpha_us = kNvlinkAlphaUs;
  double bandwidth_gbs = kNvlinkBusBandwidthGBs;  // bus bandwidth, GB/s (1e9 bytes)
  // Pipeline hand-offs between nodes (plan/cost_model.h); 0: as alpha_us / bandwidth_gbs.
  double internode_alpha_us = 0.0;
  double internode_gbs = 0.0;
  std::string preset;                             // --preset, empty when none
  ExpertSplit experts = ExpertSplit::kTensor;     // parallel.experts (mixture-of-experts layers)
};

struct LayoutLedger {
  int tensor = 1, pipeline = 1, data = 1;
  int64_t layers_per_stage = 0;               // the largest stage
  int64_t weights_bytes_per_rank = 0;         // max over ranks
  int64_t kv_bytes_per_token_per_rank = 0;    // max over ranks
  int64_t reserved_bytes_per_rank = 0;
  int64_t kv_budget_bytes_per_rank = 0;       // usable memory left for KV on the tightest rank (may be < 0)
  int64_t kv_tokens_per_rank = 0;             // min over ranks, >= 0
  int64_t concurrent_rows = 0;                // per replica, rows of row_tokens
  bool fits = false;
  double allreduce_us_per_decode_step = 0.0;  // one stage, alpha-beta model
  // Mixture-of-experts models (0 for dense ones), max over ranks, both within the figures above:
  int64_t expert_weights_bytes_per_rank = 0;  // routers and the experts the rank holds
  int64_t moe_scratch_bytes_per_rank = 0;     // the MoE block's scratch (in reserved)
};

// A layout of a mixture-of-experts model under each parallel.experts choice: what `plan` shows so
// a user can see which split fits. `legal` is false where the split cannot be used (expert:
// num_experts not divisible by the TP degree); the ledger is then left empty.
struct ExpertSplitOption {
  bool legal = false;
  LayoutLedger ledger;
};
struct ExpertSplitComparison {
  int tensor = 1, pipeline = 1;
  ExpertSplitOption tensor_split, expert_split;
};

struct Plan {
  PlanInputs inputs;
  std::vector<LayoutLedger> layouts;  // ordered by tensor, then pipeline
  // Indices into layouts, set by recommend_layouts() (plan/layout_recommendation.h, where the
  // rules are); empty when no layout fits.
  std::optional<size_t> throughput, latency;
  double throughput_tokens_per_s = 0.0;  // the throughput layout's predicted output tokens/s in total
};

// The dtype a name spells ("float32", "bfloat16", "float16"). Throws JobError naming `key` otherwise.
DType dtype_of_name(const std::string& name, const std::string& key);

// True when tensor-parallel groups of `tensor` consecutive ranks stay within nodes of
// `ranks_per_node` consecutive ranks (as topology.cpp assigns nodes when ranks_per_node is set).
bool tensor_group_fits_node(int world_size, int tensor, int ranks_per_node);

// Layouts (tensor, pipeline) of the world that can run the model: layout_problem() empty and the
// TP group within a node. Ordered by tensor, then pipeline.
std::vector<Layout> legal_layouts(const ModelConfig& config, int world_size, int ranks_per_node);

// Per-rank quantities of one layout (max over its ranks).
int64_t weights_bytes_per_rank(const ModelConfig& config, const Layout& layout, DType weight_dtype,
                               ExpertSplit experts = ExpertSplit::kTensor);
int64_t kv_bytes_per_token_per_rank(const ModelConfig& config, const Layout& layout, DType kv_dtype);
int64_t reserved_bytes_per_rank(const ModelConfig& config, const Layout& layout, const PlanInputs& in);
double allreduce_us_per_decode_step(const ModelConfig& config, const Layout& layout, const PlanInputs& in);

LayoutLedger ledger_of(const ModelConfig& config, const Layout& layout, const PlanInputs& in);
// The ledger of every legal layout; no recommendation yet (recommend_layouts()).
Plan make_plan(const ModelConfig& config, const PlanInputs& in);
// Every legal layout (by heads, layers and nodes) of a mixture-of-experts model under both splits;
// empty for a dense model.
std::vector<ExpertSplitComparison> compare_expert_splits(const ModelConfig& config, const PlanInputs& in);
int64_t moe_scratch_bytes_per_rank(const ModelConfig& config, const Layout& layout, const PlanInputs& in);
// A quantized checkpoint's dequantize scratch on CUDA (model/shard_bytes.h), max over the ranks; 0 otherwise.
int64_t dequantize_scratch_bytes_per_rank(const ModelConfig& config, const Layout& layout, const PlanInputs& in);

}  // namespace tpbatch
