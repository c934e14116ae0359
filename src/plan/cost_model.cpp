#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "model/llama_shard.h"
#include "model/shard_bytes.h"

namespace tpbatch {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

constexpr double kLogitStatsBytes = 16.0;  // sizeof(LogitStats): max, argmax, sum of exp, target a row

// Bytes every decode step streams on (stage, tp rank 0): its linear layers (q, k, v, o, gate, up,
// down; KV heads replicated when TP exceeds them) and, on the last stage, the LM head shard. The
// embedding table (one row per token), norms and RoPE tables (a few rows) are not streamed.
double streamed_bytes(const ModelConfig& config, const Layout& layout, int stage, DType weight_dtype) {
  const int t = layout.tensor;
  const int64_t H = config.hidden_size;
  const int64_t q = ceil_div(config.num_heads, t) * config.head_dim;
  const int64_t kv = static_cast<int64_t>(kv_heads_of_rank(config, t, 0).size()) * config.head_dim;
  const int64_t inter = ceil_div(config.intermediate_size, t);
  const int64_t per_layer = H * (q + 2 * kv) + q * H + 3 * H * inter;
  const Range stage_layers = layers_of_stage(config.num_layers, layout.pipeline, stage);
  const int64_t layers = stage_layers.size();
  int64_t elements = layers * per_layer;
  // Mixture-of-experts layers: the router and every expert instead of the dense MLP (a batched
  // decode step reaches most experts; the GEMM time derived from these bytes is then an upper
  // bound, each token using only its top-k of them).
  const int64_t expert_inter = ceil_div(config.expert_intermediate_size, t);
  for (int64_t l = stage_layers.begin; l < stage_layers.end; ++l)
    if (config.is_moe_layer(l)) elements += config.num_experts * (H + 3 * H * expert_inter) - 3 * H * inter;
  if (stage == layout.pipeline - 1) elements += ceil_div(config.vocab_size, t) * H;
  return static_cast<double>(elements) * static_cast<double>(dtype_size(weight_dtype));
}

// The LM head shard's bytes on the last stage (0 elsewhere): part of every decode step's stream,
// but a prefill chunk multiplies it only by the rows whose last prompt token it holds
// (model_runner's compute_logits runs on the step's logit rows, not on every token).
double lm_head_bytes(const ModelConfig& config, const Layout& layout, int stage, DType weight_dtype) {
  if (stage != layout.pipeline - 1) return 0.0;
  return static_cast<double>(ceil_div(config.vocab_size, layout.tensor) * config.hidden_size) *
         static_cast<double>(dtype_size(weight_dtype));
}

}  // namespace

double allreduce_us(double bytes, int t, const MachineModel& m) {
  if (t <= 1) return 0.0;
  return m.alpha_us + 2.0 * (t - 1) / t * bytes / (m.allreduce_gbs * 1e3);  // GB/s = 1e3 B/us
}

double allgather_us(double bytes_per_rank, int t, const MachineModel& m) {
  if (t <= 1) return 0.0;
  return m.alpha_us + (t - 1.0) * bytes_per_rank / (m.allreduce_gbs * 1e3);
}

bool handoff_crosses_nodes(const Layout& layout, int stage, int ranks_per_node) {
  if (ranks_per_node <= 0 || stage + 1 >= layout.pipeline) return false;
  for (int dp = 0; dp < layout.data(); ++dp) {
    const int from = world_rank_of(layout, RankCoords{dp, stage, 0});
    const int to = world_rank_of(layout, RankCoords{dp, stage + 1, 0});
    if (from / ranks_per_node != to / ranks_per_node) return true;
  }
  return false;
}

double handoff_us(double bytes, bool crosses_nodes, const MachineModel& m) {
  const bool net = crosses_nodes && m.internode_gbs > 0;
  const double alpha = crosses_nodes && m.internode_alpha_us > 0 ? m.internode_alpha_us : m.alpha_us;
  return alpha + bytes / ((net ? m.internode_gbs : m.allreduce_gbs) * 1e3);
}

double gemm_rate_flops(const MachineModel& m, double rows) {
  const double peak = m.gemm_tflops * 1e12;
  const std::vector<GemmRate>& pts = m.gemm_rates;
  if (pts.empty()) {
    if (m.gemm_half_rows <= 0) return peak;
    return peak * rows / (rows + m.gemm_half_rows);
  }
  for (size_t i = 0; i < pts.size(); ++i)
    if (pts[i].rows <= 0 || pts[i].tflops <= 0 || (i > 0 && pts[i].rows <= pts[i - 1].rows))
      throw JobError("cost model: GEMM rates must be positive points in ascending rows");
  if (rows <= pts.front().rows) return pts.front().tflops * 1e12 * rows / pts.front().rows;
  for (size_t i = 1; i < pts.size(); ++i)
    if (rows <= pts[i].rows) {
      const double f = (rows - pts[i - 1].rows) / (pts[i].rows - pts[i - 1].rows);
      return (pts[i - 1].tflops + f * (pts[i].tflops - pts[i - 1].tflops)) * 1e12;
    }
  // Past the last point: the m_half curve through it (R_last when it is at or above the peak).
  const double last = pts.back().tflops * 1e12, m_last = pts.back().rows;
  if (last >= peak) return last;
  const double half = m_last * (peak / last - 1.0);
  return peak * rows / (rows + half);
}

namespace {

void check_cost_inputs(const MachineModel& machine, const RowShape& shape) {
  if (machine.memory_gbs <= 0 || machine.gemm_tflops <= 0 || machine.allreduce_gbs <= 0 || machine.alpha_us < 0 ||
      machine.internode_gbs < 0 || machine.internode_alpha_us < 0 || machine.attention_tflops < 0 || machine.prefill_attention_tflops < 0 || machine.layer_overhead_us < 0 ||
      machine.logits_overhead_us < 0)
    throw JobError("cost model: memory bandwidth, GEMM rate and allreduce bandwidth must be positive, alpha and the "
                   "attention rates >= 0");
  if (shape.rows < 1 || shape.prompt_tokens < 1 || shape.new_tokens < 1 || shape.max_batch_tokens < 0)
    throw JobError("cost model: rows, prompt tokens and new tokens must be at least 1");
}

// What every stage's cost reads: the micro-batch, the prefill chunk, the sizes and the rates.
struct BatchShape {
  int64_t mb_rows = 0, chunks = 1;
  double rows = 0, prompt = 0, mean_context = 0, chunk_tokens = 0, chunk_rows = 0;
  double bw_per_us = 0, act = 0, wbytes = 0, H = 0, local_q_dims = 0;
  double decode_rate = 0, prefill_rate = 0, head_rate = 0;
};

BatchShape batch_shape(const ModelConfig& config, const Layout& layout, const CostDtypes& dtypes,
                       const MachineModel& machine, const RowShape& shape) {
  BatchShape b;
  b.bw_per_us = machine.memory_gbs * 1e3;  // bytes per microsecond
  b.act = static_cast<double>(dtype_size(dtypes.activation));
  b.wbytes = static_cast<double>(dtype_size(dtypes.weight));
  b.H = static_cast<double>(config.hidden_size);
  // The scheduler's micro-batches: one per stage in flight, ceil(rows / PP) rows each.
  b.mb_rows = ceil_div(shape.rows, layout.pipeline);
  b.rows = static_cast<double>(b.mb_rows);
  b.prompt = static_cast<double>(shape.prompt_tokens);
  b.mean_context = b.prompt + static_cast<double>(shape.new_tokens) / 2.0;
  // Prefill in chunks of max_batch_tokens (at least one whole prompt per chunk, as the scheduler
  // fills its token budget with whole rows' chunks; partial rows change the chunk count little).
  const int64_t mb_prompt_tokens = b.mb_rows * shape.prompt_tokens;
  b.chunks = shape.max_batch_tokens > 0 ? ceil_div(mb_prompt_tokens, shape.max_batch_tokens) : 1;
  b.chunk_tokens = static_cast<double>(mb_prompt_tokens) / static_cast<double>(b.chunks);
  b.chunk_rows = b.chunk_tokens / b.prompt;
  const double local_q_heads = static_cast<double>(ceil_div(config.num_heads, layout.tensor));
  b.local_q_dims = local_q_heads * static_cast<double>(config.head_dim);
  b.decode_rate = gemm_rate_flops(machine, b.rows);
  b.prefill_rate = gemm_rate_flops(machine, b.chunk_tokens);
  b.head_rate = gemm_rate_flops(machine, b.chunk_rows);
  return b;
}

// One stage's time for a decode step and for one prefill chunk; the decode terms are added to p.
struct StageTimes {
  double decode_us = 0, prefill_us = 0;
};

StageTimes stage_times(const ModelConfig& config, const Layout& layout, const CostDtypes& dtypes,
                       const MachineModel& machine, const BatchShape& b, int s, SpeedPrediction& p) {
  const int t = layout.tensor;
  const int64_t layers = layers_of_stage(config.num_layers, layout.pipeline, s).size();
  const bool last = s == layout.pipeline - 1;
  const double w = streamed_bytes(config, layout, s, dtypes.weight);
  const double weight_us = w / b.bw_per_us;
  const double flops_per_token = 2.0 * w / b.wbytes;
  const double gemm_us = b.rows * flops_per_token / b.decode_rate * 1e6;
  const double kv_per_token = static_cast<double>(kv_bytes_per_token_of_rank(config, t, 0, layers, dtypes.kv));
  const double kv_us = b.rows * b.mean_context * kv_per_token / b.bw_per_us;
  // QK^T and PV: 2 FLOPs x head_dim each per (query head, visible position).
  const double attn_flops = b.rows * static_cast<double>(layers) * b.mean_context * 4.0 * b.local_q_dims;
  const double attn_us =
      machine.attention_tflops > 0 ? std::max(kv_us, attn_flops / (machine.attention_tflops * 1e12) * 1e6) : kv_us;
  // model_runner's collectives: two allreduces a layer, one more on the first stage (the
  // vocab-parallel embedding), and on the last stage an allgather of each row's logit statistics.
  const bool first = s == 0;
  const double n_allreduce = 2.0 * static_cast<double>(layers) + (first ? 1.0 : 0.0);
  const double ar_us = n_allreduce * allreduce_us(b.rows * b.H * b.act, t, machine) +
                       (last ? allgather_us(b.rows * kLogitStatsBytes, t, machine) : 0.0);
  p.weight_read_us += weight_us;
  p.gemm_us += gemm_us;
  p.kv_read_us += kv_us;
  p.attention_us += attn_us;
  const double logits_us = last ? machine.logits_overhead_us / t : 0.0;
  const double overhead_us = b.rows * (static_cast<double>(layers) * machine.layer_overhead_us + logits_us);
  p.allreduce_us += ar_us;
  p.overhead_us += overhead_us;
  StageTimes times;
  times.decode_us = std::max(weight_us, gemm_us) + attn_us + overhead_us + ar_us;

  // Prefill of one chunk: linear FLOPs of its tokens, causal attention (QK^T and PV: 2 x 2 x P^2/2
  // x local q dims per layer per row), allreduces of the whole chunk.
  const double prefill_attn_flops =
      b.chunk_rows * static_cast<double>(layers) * 2.0 * b.prompt * b.prompt * b.local_q_dims;
  const double prefill_attn_us = machine.prefill_attention_tflops > 0
                                     ? prefill_attn_flops / (machine.prefill_attention_tflops * 1e12) * 1e6
                                     : prefill_attn_flops / b.prefill_rate * 1e6;
  // The LM head runs on the chunk's logit rows only (one a row: its last prompt token), at their rate.
  const double head_flops_per_token = 2.0 * lm_head_bytes(config, layout, s, dtypes.weight) / b.wbytes;
  const double prefill_gemm_us = b.chunk_tokens * (flops_per_token - head_flops_per_token) / b.prefill_rate * 1e6 +
                                 (last ? b.chunk_rows * head_flops_per_token / b.head_rate * 1e6 : 0.0) +
                                 prefill_attn_us;
  const double prefill_ar_us = n_allreduce * allreduce_us(b.chunk_tokens * b.H * b.act, t, machine) +
                               (last ? allgather_us(b.chunk_rows * kLogitStatsBytes, t, machine) : 0.0);
  const double prefill_overhead_us =
      b.chunk_tokens * static_cast<double>(layers) * machine.layer_overhead_us + b.chunk_rows * logits_us;
  times.prefill_us = std::max(weight_us, prefill_gemm_us) + prefill_overhead_us + prefill_ar_us;
  return times;
}

// The G = PP x chunks pieces of prefill go through the stages in turn: piece g starts on stage s
// when it has left stage s-1 (and crossed the hand-off) and stage s has finished piece g-1. The
// stage times are each rank's share of the node when all its ranks compute; while the
// pipeline fills and drains only the stages holding a piece compute (at lockstep slot g + s, the
// stages s' with a piece g + s - s' in 0..G-1), so on a CPU node whose ranks outnumber its cores
// a piece runs min(oversubscription, PP / those stages) times faster: the cores the idle stages'
// ranks leave (4 ranks x 1 thread on 2 cores at PP = 2: the first piece on stage 0 has both cores).
// Sets p.ttft_s and p.prefill_s.
void schedule_prefill(const std::vector<double>& prefill_stage, const std::vector<bool>& crosses,
                      const BatchShape& b, const MachineModel& machine, int pp, SpeedPrediction& p) {
  const int64_t G = static_cast<int64_t>(pp) * b.chunks;
  const double over = std::max(1.0, machine.oversubscription);
  std::vector<double> left(static_cast<size_t>(pp), 0.0);  // when stage s finished its last piece
  const int64_t median_piece = G / 2;                      // the engine's TTFT p50 row (see below)
  for (int64_t g = 0; g < G; ++g) {
    double arrived = 0.0;  // when piece g leaves the previous stage
    for (int s = 0; s < pp; ++s) {
      const int64_t slot = g + s;
      int64_t active = 0;
      for (int64_t s2 = 0; s2 < pp; ++s2) active += slot - s2 >= 0 && slot - s2 < G;
      const double speedup = std::min(over, static_cast<double>(pp) / static_cast<double>(std::max<int64_t>(1, active)));
      const double handoff =
          s > 0 ? handoff_us(b.chunk_tokens * b.H * b.act, crosses[static_cast<size_t>(s - 1)], machine) : 0.0;
      const double start = std::max(s > 0 ? arrived + handoff : 0.0, left[static_cast<size_t>(s)]);
      arrived = left[static_cast<size_t>(s)] = start + prefill_stage[static_cast<size_t>(s)] / speedup;
    }
    // The engine's TTFT p50 is the row at rank round(0.5 (rows - 1)), which lies in piece floor(G / 2)
    // when the pieces hold equal rows; the whole prefill ends with piece G - 1.
    if (g == median_piece) p.ttft_s = arrived * 1e-6;
    if (g == G - 1) p.prefill_s = arrived * 1e-6;
  }
}

}  // namespace

SpeedPrediction predict_speed(const ModelConfig& config, const Layout& layout, const CostDtypes& dtypes,
                              const MachineModel& machine, const RowShape& shape) {
  check_cost_inputs(machine, shape);
  const int pp = layout.pipeline;
  const BatchShape b = batch_shape(config, layout, dtypes, machine, shape);
  std::vector<bool> crosses(static_cast<size_t>(pp), false);  // the hand-off after stage s
  for (int s = 0; s + 1 < pp; ++s) crosses[static_cast<size_t>(s)] = handoff_crosses_nodes(layout, s, machine.ranks_per_node);

  SpeedPrediction p;
  p.micro_batch_rows = b.mb_rows;
  p.prefill_chunks = b.chunks;
  double decode_sum = 0.0, decode_slowest = 0.0;
  std::vector<double> prefill_stage(static_cast<size_t>(pp));
  for (int s = 0; s < pp; ++s) {
    const StageTimes times = stage_times(config, layout, dtypes, machine, b, s, p);
    decode_sum += times.decode_us;
    decode_slowest = std::max(decode_slowest, times.decode_us);
    prefill_stage[static_cast<size_t>(s)] = times.prefill_us;
  }
  for (int s = 0; s + 1 < pp; ++s) p.handoff_us += handoff_us(b.rows * b.H * b.act, crosses[static_cast<size_t>(s)], machine);
  p.decode_step_us = std::max(pp * decode_slowest, decode_sum + p.handoff_us);
  p.tokens_per_s_replica = static_cast<double>(shape.rows) / (p.decode_step_us * 1e-6);
  p.tokens_per_s_total = p.tokens_per_s_replica * layout.data();
  schedule_prefill(prefill_stage, crosses, b, machine, pp, p);
  const double batch_s = p.prefill_s + static_cast<double>(shape.new_tokens) * p.decode_step_us * 1e-6;
  p.batch_output_tokens_per_s =
      static_cast<double>(shape.rows) * static_cast<double>(shape.new_tokens) * layout.data() / batch_s;
  return p;
}

}  // namespace tpbatch
