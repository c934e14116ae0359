#pragma once
// `tpbatch plan`'s speed prediction: a roofline-style cost model of one layout's decode step and
// prefill, from the model's shapes and a machine's measured (or given) rates. Pure arithmetic,
// unit-tested with hand-computed cases (tests/unit/test_cost_model.cpp).
//
// Per pipeline stage s (its tensor-parallel rank 0; the ranks of a stage are alike up to rounding):
//   streamed bytes   W_s = shard_weight_bytes of the stage without the embedding table (a decode step
//                    reads one embedding row per token, but every linear layer and the LM head whole)
//   GEMM FLOPs       2 x tokens x W_s / weight bytes per element
//   GEMM rate        R(m) = R_peak x m / (m + m_half): the rate the GEMM reaches at m token rows
//                    (small-m GEMMs are inefficient even from cache); m_half = 0 means R_peak always
//   KV bytes read    rows x mean context (prompt + new/2) x KV bytes per token of the stage
//   allreduces       2 per layer (+1 on the last stage: the vocab-parallel logits), each of
//                    S = tokens x hidden x activation bytes, ring cost alpha + 2(t-1)/t x S / B
//   stage time       max(W_s / BW, FLOPs / R(m)) + KV bytes / BW + allreduces
// Decode step = sum of the stage times + (PP-1) hand-offs of rows x hidden x activation bytes
// (alpha + S / B): the batch crosses the stages one after another (no overlap assumed).
// TTFT (a batch of rows prefilled together, rows x prompt tokens): per stage max(W_s / BW,
// (linear + attention FLOPs) / R(T)) + its allreduces, summed, + hand-offs.
// Tokens/s per replica = rows / decode step; in total x data-parallel replicas.
#include <cstdint>

#include "backend/dtype.h"
#include "model/config.h"
#include "topology/layout.h"

namespace tpbatch {

// One rank's machine. On the CPU backend ranks of a node share memory bandwidth and cores: the
// caller passes each rank's share (plan_command divides node totals by the ranks per node).
struct MachineModel {
  double memory_gbs = 0.0;       // read bandwidth, GB/s (1e9 B/s)
  double gemm_tflops = 0.0;      // GEMM peak, TFLOP/s (1e12)
  double gemm_half_rows = 0.0;   // m_half of R(m) above; 0: the peak at every m
  double alpha_us = 0.0;         // allreduce / hand-off latency
  double allreduce_gbs = 0.0;    // allreduce bus bandwidth (and the hand-off's), GB/s
};

struct RowShape {
  int64_t prompt_tokens = 128;
  int64_t new_tokens = 64;
  int64_t rows = 1;              // concurrent rows per replica
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
  double kv_read_us = 0.0;
  double allreduce_us = 0.0;
  double handoff_us = 0.0;
  double decode_step_us = 0.0;
  double tokens_per_s_replica = 0.0;
  double tokens_per_s_total = 0.0;
  double ttft_s = 0.0;
  // The whole batch of one replica: TTFT + new_tokens decode steps; output tokens/s over all replicas.
  double batch_output_tokens_per_s = 0.0;
};

// The ring allreduce time of S bytes over t ranks (0 when t <= 1).
double allreduce_us(double bytes, int t, const MachineModel& m);
// R(m) in FLOP/s.
double gemm_rate_flops(const MachineModel& m, double rows);

SpeedPrediction predict_speed(const ModelConfig& config, const Layout& layout, const CostDtypes& dtypes,
                              const MachineModel& machine, const RowShape& shape);

}  // namespace tpbatch
