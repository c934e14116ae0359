#include "plan/cost_model.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "model/llama_shard.h"
#include "model/shard_bytes.h"

namespace tpbatch {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

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

}  // namespace

double allreduce_us(double bytes, int t, const MachineModel& m) {
  if (t <= 1) return 0.0;
  return m.alpha_us + 2.0 * (t - 1) / t * bytes / (m.allreduce_gbs * 1e3);  // GB/s = 1e3 B/us
}

double gemm_rate_flops(const MachineModel& m, double rows) {
  const double peak = m.gemm_tflops * 1e12;
  if (m.gemm_half_rows <= 0) return peak;
  return peak * rows / (rows + m.gemm_half_rows);
}

SpeedPrediction predict_speed(const ModelConfig& config, const Layout& layout, const CostDtypes& dtypes,
                              const MachineModel& machine, const RowShape& shape) {
  if (machine.memory_gbs <= 0 || machine.gemm_tflops <= 0 || machine.allreduce_gbs <= 0 || machine.alpha_us < 0)
    throw JobError("cost model: memory bandwidth, GEMM rate and allreduce bandwidth must be positive, alpha >= 0");
  if (shape.rows < 1 || shape.prompt_tokens < 1 || shape.new_tokens < 1)
    throw JobError("cost model: rows, prompt tokens and new tokens must be at least 1");
  const int t = layout.tensor;
  const double bw_per_us = machine.memory_gbs * 1e3;  // bytes per microsecond
  const double act = static_cast<double>(dtype_size(dtypes.activation));
  const double wbytes = static_cast<double>(dtype_size(dtypes.weight));
  const double H = static_cast<double>(config.hidden_size);
  const double rows = static_cast<double>(shape.rows);
  const double prompt = static_cast<double>(shape.prompt_tokens);
  const double mean_context = prompt + static_cast<double>(shape.new_tokens) / 2.0;
  const double prefill_tokens = rows * prompt;
  const double local_q_dims = static_cast<double>(ceil_div(config.num_heads, t) * config.head_dim);
  const double handoff_one = machine.alpha_us + rows * H * act / (machine.allreduce_gbs * 1e3);
  const double decode_rate = gemm_rate_flops(machine, rows);
  const double prefill_rate = gemm_rate_flops(machine, prefill_tokens);

  SpeedPrediction p;
  double decode_us = 0.0, prefill_us = 0.0;
  for (int s = 0; s < layout.pipeline; ++s) {
    const int64_t layers = layers_of_stage(config.num_layers, layout.pipeline, s).size();
    const bool last = s == layout.pipeline - 1;
    const double w = streamed_bytes(config, layout, s, dtypes.weight);
    const double weight_us = w / bw_per_us;
    const double flops_per_token = 2.0 * w / wbytes;
    const double gemm_us = rows * flops_per_token / decode_rate * 1e6;
    const double kv_per_token =
        static_cast<double>(kv_bytes_per_token_of_rank(config, t, 0, layers, dtypes.kv));
    const double kv_us = rows * mean_context * kv_per_token / bw_per_us;
    const double n_allreduce = 2.0 * static_cast<double>(layers) + (last ? 1.0 : 0.0);
    const double ar_us = t > 1 ? n_allreduce * allreduce_us(rows * H * act, t, machine) : 0.0;
    p.weight_read_us += weight_us;
    p.gemm_us += gemm_us;
    p.kv_read_us += kv_us;
    p.allreduce_us += ar_us;
    decode_us += std::max(weight_us, gemm_us) + kv_us + ar_us;

    // Prefill: linear FLOPs of every prompt token, causal attention (QK^T and PV: 2 x 2 x P^2/2 x
    // local q dims per layer per row), allreduces of the whole chunk.
    const double attn_flops = rows * static_cast<double>(layers) * 2.0 * prompt * prompt * local_q_dims;
    const double prefill_gemm_us = (prefill_tokens * flops_per_token + attn_flops) / prefill_rate * 1e6;
    const double prefill_ar_us = t > 1 ? n_allreduce * allreduce_us(prefill_tokens * H * act, t, machine) : 0.0;
    prefill_us += std::max(weight_us, prefill_gemm_us) + prefill_ar_us;
  }
  p.handoff_us = (layout.pipeline - 1) * handoff_one;
  p.decode_step_us = decode_us + p.handoff_us;
  p.tokens_per_s_replica = rows / (p.decode_step_us * 1e-6);
  p.tokens_per_s_total = p.tokens_per_s_replica * layout.data();
  const double prefill_handoff_us =
      (layout.pipeline - 1) * (machine.alpha_us + prefill_tokens * H * act / (machine.allreduce_gbs * 1e3));
  p.ttft_s = (prefill_us + prefill_handoff_us) * 1e-6;
  const double batch_s = p.ttft_s + static_cast<double>(shape.new_tokens) * p.decode_step_us * 1e-6;
  p.batch_output_tokens_per_s = rows * static_cast<double>(shape.new_tokens) * layout.data() / batch_s;
  return p;
}

}  // namespace tpbatch
