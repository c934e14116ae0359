#pragma once
// `tpbatch plan --calibrate`: measures this machine's rates for the cost model (plan/cost_model.h).
// Every rank mpirun launched measures at once, each with the OpenMP threads a run's rank gets
// (engine.threads, else its share of the CPUs it may run on, topology/cpu_share.h, as run_job's), so
// the rates are those of the run's layout: ranks sharing cores and memory bandwidth slow each other
// here as they do in the run. A pass lasts from the node's first rank's start to its last rank's end
// (ranks beyond the cores take turns); node totals = the node's ranks' work / that time (rank 0
// reports them).
//   read bandwidth   an OpenMP sum (16 independent sums a thread) over a 256 MiB float buffer per
//                    rank, best of 5
//   GEMM peak        cpu::gemm_nt fp32 at 512 x 2048 x 2048
//   GEMM at decode   cpu::gemm_nt at m = 1, 4, 8, 16 (and 32, 64, 128 up to the first >= the
//                    row shape's rows per micro-batch) rows over one decoder layer's
//   rows, R(m)       matrices (q+k+v, o, gate, up, down: the model's k, its weight dtype; n scaled
//                    down to at most 32 MiB a layer), rotating over copies of >= 128 MiB so the
//                    weights stream from memory as in a decode step. The old single figure
//                    (32 rows x 2048 x 768, in cache) and m_half = 32 x (R_peak / R(32) - 1) stay
//                    in the JSON for comparison.
//   attention        cpu::paged_attention at the model's heads, head_dim and KV dtype: decode of
//                    the row shape's rows at its mean context (each layer's cache rotated, up to
//                    128 MiB), and a prefill of whole prompts (up to 512 tokens, 8 x 128^2 work);
//                    the rates count 4 x head_dim FLOPs per (query head, visible position)
//   step overhead    the element-wise work of a decode step at the row shape's rows through the
//                    CPU backend (per layer: RMSNorms, RoPE, SiLU x up, residual adds; the logits'
//                    final norm and logit_stats over the vocabulary), microseconds per row
//   (each figure is the median of its passes: a run meets the machine's usual state, not its best)
//   allreduce        MPI_Allreduce of float sums, 8 B and 4 MiB, when launched by mpirun with >= 2
//                    ranks: alpha = the 8 B time, B = 2(t-1)/t x S / (t(S) - alpha); then the
//                    alpha a tensor-parallel step meets: the decode GEMM pass at the row shape's
//                    rows with an allreduce of rows x hidden floats after each o and down
//                    projection, its extra time over the plain pass per allreduce less the bytes
//                    at B (on 4 ranks on 2 cores ~ a scheduler time slice: a peer waiting for a
//                    core while the caller spins; measured 80 ms of a 108 ms TP=2 x PP=2 step in
//                    the run's own allreduce statistics), for each TP size t dividing the world
//                    in the groups of t ranks a layout makes, all at once. A layout's plan uses
//                    the alpha of its TP size.
#include <cstdint>
#include <vector>

#include "backend/dtype.h"
#include "model/config.h"
#include "plan/cost_model.h"

namespace tpbatch {

struct CalibrationRequest {
  bool memory = true;
  bool gemm = true;
  int threads = 0;              // per rank; 0: cpu_share()'s threads (the run's default)
  DType weight = DType::F32;    // of the decode GEMMs
  DType kv = DType::F32;        // of the attention's cache
  int64_t rows = 32;            // decode attention: rows per step (per micro-batch)
  int64_t prompt_tokens = 128;  // decode context = prompt + new / 2; prefill of rows x prompt
  int64_t new_tokens = 64;
};

// The allreduce alpha a tensor-parallel step of `tensor` ranks meets (the world split in groups of
// that many consecutive ranks, every group at once).
struct TensorAlpha {
  int tensor = 0;
  double alpha_us = 0.0;
};

struct Calibration {
  double memory_gbs = 0.0;         // node total
  double gemm_tflops = 0.0;        // large shape, node total
  double gemm_decode_tflops = 0.0; // 32 x 2048 x 768 in cache (the old figure), node total
  double gemm_half_rows = 0.0;
  std::vector<GemmRate> gemm_rates;       // R(m) at the model's layer, streamed, node totals
  double attention_tflops = 0.0;          // decode paged attention, node total
  double prefill_attention_tflops = 0.0;  // prefill paged attention, node total
  double layer_overhead_us = 0.0;         // element-wise work per row per layer, node equivalent
  double logits_overhead_us = 0.0;        // final norm + logit statistics per row, node equivalent
  int gemm_threads = 1;            // OpenMP threads of each measuring rank
  int cores = 1;                   // of this machine: its ranks' CPUs (cpu_share()'s machine_cpus)
  int ranks_measuring = 1;         // ranks of this node that measured at once
  bool allreduce_measured = false;
  int allreduce_ranks = 0;
  double alpha_us = 0.0;           // isolated allreduces, back to back
  double allreduce_gbs = 0.0;
  double synced_alpha_us = 0.0;    // between GEMMs, as a TP layer of the whole world meets it
  std::vector<TensorAlpha> synced_alphas;  // the same for each TP size dividing the world (the plan's alpha)
  int mpi_rank = 0;                // the caller prints only on rank 0
};

// Under mpirun with >= 2 ranks: the allreduce first, then every rank measures memory, GEMM,
// attention and the step overhead at once and rank 0 gets the node's totals; MPI is finalised before returning (the
// other ranks return with mpi_rank set, their figures their own).
Calibration calibrate_machine(const ModelConfig& config, const CalibrationRequest& request);

}  // namespace tpbatch
