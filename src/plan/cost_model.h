#pragma once
// `tpbatch plan`'s speed prediction: a roofline-style cost model of one layout's decode step and
// prefill, from the model's shapes and a machine's measured (or given) rates. Pure arithmetic,
// unit-tested with hand-computed cases (tests/unit/test_cost_model.cpp: an H200 node;
// tests/unit/test_plan_speed.cpp: a CPU node's measured terms on the 125M model's shapes).
//
// Per pipeline stage s (its tensor-parallel rank 0; the ranks of a stage are alike up to rounding):
//   streamed bytes   W_s = shard_weight_bytes of the stage without the embedding table (a decode step
//                    reads one embedding row per token, but every linear layer and the LM head whole)
//   GEMM FLOPs       2 x tokens x W_s / weight bytes per element
//   GEMM rate        R(m), the rate gemm_nt reaches at m token rows. Measured points (m_i, R_i)
//                    (`plan --calibrate`: the model's k, its weight dtype, weights streamed from
//                    memory, at the threads per rank of the run; or --gemm-rates): R linear in m
//                    between points, R_1 x m / m_1 below the first (the same time as m_1: the
//                    weight stream), and above the last R_peak x m / (m + m_half) with m_half =
//                    m_last x (R_peak / R_last - 1), continuous there. Without points
//                    R(m) = R_peak x m / (m + m_half) (m_half = 0: R_peak always).
//   attention        decode: max(KV bytes read / BW, attention FLOPs / R_attn), the FLOPs
//                    rows x layers x local q heads x mean context x 4 x head_dim (QK^T and PV) and
//                    R_attn the measured paged-attention rate (0: the KV bytes alone, as an
//                    accelerator's attention is bound by them); KV bytes = rows x mean context
//                    (prompt + new/2) x KV bytes per token of the stage
//   step overhead    rows x (layers x e_layer + (last stage) e_logits / t): the element-wise work
//                    per row (norms, RoPE, SiLU x up, residual adds; the final norm and the logits'
//                    max / sum of exp over the vocabulary shard), measured through the CPU backend
//                    (0 where not given: an accelerator's kernels hide in the GEMM time); the layer
//                    part is not divided by TP (the norms are replicated), prefill pays it for
//                    every prompt token
//   collectives      as model_runner calls them: 2 allreduces per layer (+1 on the first stage:
//                    the vocab-parallel embedding), each of S = tokens x hidden x activation bytes,
//                    ring cost alpha + 2(t-1)/t x S / B; on the last stage one allgather of the
//                    logit rows' 16-byte statistics, alpha + (t-1) x rows x 16 B / B
//   stage time       max(W_s / BW, FLOPs / R(m)) + attention + overhead + allreduces, at m = the
//                    rows of one micro-batch: the scheduler splits a replica's rows into PP micro-batches of
//                    ceil(rows / PP) (engine/scheduler.cpp), one per stage in flight
// Decode step (a row's time per output token) = max(PP x the slowest stage, the sum of the stages +
// (PP-1) hand-offs of rows x hidden x activation bytes (alpha + S / B)): each stage serves every
// micro-batch once per step, and one micro-batch crosses all the stages in turn. PP = 1: the stage.
// A hand-off between stages on different nodes (ranks_per_node below; TP groups never span nodes)
// costs the inter-node alpha + S / B instead, in the replica where that is slowest.
// Prefill pieces (the G = PP x chunks below) go through the stages in turn, each stage taking the
// next piece when it has finished the last one and the piece has crossed the hand-off; while the
// pipeline fills and drains only the stages holding a piece compute, and on an oversubscribed CPU
// node (MachineModel::oversubscription > 1) they run min(oversubscription, PP / busy stages) faster.
// TTFT: the prompt tokens of a micro-batch prefilled in chunks of max_batch_tokens; a chunk of T
// tokens of r rows costs per stage max(W_s / BW, linear FLOPs / R(T) + LM head FLOPs of its r logit
// rows / R(r) + attention FLOPs / R_prefill_attn)
// (R_prefill_attn 0: the attention FLOPs at R(T) too) + its allreduces. Without oversubscription
// piece g is done after the sum of the stages + g x the slowest (+ hand-offs); TTFT is the median
// row's (the engine's p50): piece floor(G/2); the whole prefill ends with piece G-1.
// Tokens/s per replica = rows / decode step; in total x data-parallel replicas.
// The allreduce alpha on the CPU is the one `plan --calibrate` measures between GEMMs (a peer's
// late arrival included: on more ranks than cores it is a scheduler time slice, not microseconds).
// Not counted: the scheduler's and sampler's host work per step (a perf of a 32-row decode puts it
// well under 1%), and any overlap of a stage's GEMMs with its allreduces (none in this engine).
#include <cstdint>
#include <vector>

#include "backend/dtype.h"
#include "model/config.h"
#include "topology/layout.h"

namespace tpbatch {

// One rank's machine. On the CPU backend ranks of a node share memory bandwidth and cores: the
// caller passes each rank's share (plan_command divides node totals by the ranks per node).
struct GemmRate {
  double rows = 0.0;             // m, token rows of the GEMM
  double tflops = 0.0;           // the rate gemm_nt reached there
};

struct MachineModel {
  double memory_gbs = 0.0;       // read bandwidth, GB/s (1e9 B/s)
  double gemm_tflops = 0.0;      // GEMM peak, TFLOP/s (1e12)
  double gemm_half_rows = 0.0;   // m_half of R(m) above; 0: the peak at every m
  double alpha_us = 0.0;         // allreduce / hand-off latency
  double allreduce_gbs = 0.0;    // allreduce bus bandwidth (and the hand-off's), GB/s
  std::vector<GemmRate> gemm_rates;       // measured R(m), ascending rows; empty: the m_half curve
  double attention_tflops = 0.0;          // decode paged attention; 0: KV bytes / BW only
  double prefill_attention_tflops = 0.0;  // prefill attention; 0: at the GEMM rate R(T)
  double layer_overhead_us = 0.0;         // element-wise work per row per layer (e_layer)
  double logits_overhead_us = 0.0;        // per row for the whole vocabulary (e_logits)
  // CPU: the node's ranks x threads per rank / its cores, when above 1 (4 ranks x 1 thread on 2
  // cores: 2). The rates above are then a rank's share while all the node's ranks compute; a phase
  // where fewer compute (the prefill pipeline's fill and drain) runs faster, up to this factor.
  // 1: no such gain (an accelerator's rank has its device to itself).
  double oversubscription = 1.0;
  // Nodes: ranks 0..n-1 on the first, and so on (topology/layout.h's rank order). A pipeline
  // hand-off between nodes pays the inter-node figures (0: the same as alpha_us / allreduce_gbs).
  int ranks_per_node = 0;                 // 0: every rank on one node
  double internode_alpha_us = 0.0;
  double internode_gbs = 0.0;
};

struct RowShape {
  int64_t prompt_tokens = 128;
  int64_t new_tokens = 64;
  int64_t rows = 1;              // concurrent rows per replica
  int64_t max_batch_tokens = 0;  // tokens per prefill chunk (engine.max_batch_tokens); 0: unchunked
};

struct CostDtypes {
  DType weight = DType::BF16;
  DType kv = DType::BF16;
  DType activation = DType::BF16;
};

struct SpeedPrediction {
  // Decode step, summed over the stages, microseconds.
  double weight_read_us = 0.0;   // sum of W_s / BW
  double gemm_us = 0.0;          // sum of FLOPs / R(rows)
  double kv_read_us = 0.0;       // sum of KV bytes / BW
  double attention_us = 0.0;     // sum of max(KV bytes / BW, attention FLOPs / R_attn)
  double overhead_us = 0.0;      // sum of the step overheads
  double allreduce_us = 0.0;
  double handoff_us = 0.0;
  double decode_step_us = 0.0;
  double tokens_per_s_replica = 0.0;
  double tokens_per_s_total = 0.0;
  double ttft_s = 0.0;           // the median row's, as the engine's TTFT p50
  double prefill_s = 0.0;        // the whole batch's prefill
  int64_t micro_batch_rows = 0;  // ceil(rows / PP): the m of the decode GEMMs
  int64_t prefill_chunks = 1;
  // The whole batch of one replica: prefill + new_tokens decode steps; output tokens/s over all replicas.
  double batch_output_tokens_per_s = 0.0;
};

// The ring allreduce time of S bytes over t ranks (0 when t <= 1).
double allreduce_us(double bytes, int t, const MachineModel& m);
// The ring allgather of S bytes from each of t ranks: alpha + (t-1) x S / B (0 when t <= 1).
double allgather_us(double bytes_per_rank, int t, const MachineModel& m);
// True when the hand-off from stage `stage` to the next crosses nodes in some replica.
bool handoff_crosses_nodes(const Layout& layout, int stage, int ranks_per_node);
// One pipeline hand-off of S bytes: alpha + S / B, at the inter-node figures when it crosses nodes.
double handoff_us(double bytes, bool crosses_nodes, const MachineModel& m);
// R(m) in FLOP/s (see above). Throws JobError when gemm_rates are not ascending positive points.
double gemm_rate_flops(const MachineModel& m, double rows);

SpeedPrediction predict_speed(const ModelConfig& config, const Layout& layout, const CostDtypes& dtypes,
                              const MachineModel& machine, const RowShape& shape);

}  // namespace tpbatch
