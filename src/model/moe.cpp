#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "model/scratch_buffer.h"

namespace tpbatch {

MoeRouting route_tokens(std::span<const float> logits, int64_t tokens, int64_t experts, int64_t top_k,
                        bool renormalise, int64_t stride) {
  if (stride == 0) stride = experts;
  if (experts <= 0 || top_k <= 0 || top_k > experts || stride < experts ||
      static_cast<int64_t>(logits.size()) != tokens * stride)
    throw Error("internal error: route_tokens: " + std::to_string(logits.size()) + " logits for " +
                std::to_string(tokens) + " tokens x " + std::to_string(experts) + " experts, top " +
                std::to_string(top_k));
  MoeRouting r;
  r.tokens = tokens, r.experts = experts, r.top_k = top_k;
  const size_t slots = static_cast<size_t>(tokens * top_k);
  r.token_expert.resize(slots);
  r.token_weight.resize(slots);
  std::vector<double> p(static_cast<size_t>(experts));
  std::vector<int32_t> order(static_cast<size_t>(experts));
  std::vector<int64_t> count(static_cast<size_t>(experts), 0);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* z = logits.data() + t * stride;
    const double mx = *std::max_element(z, z + experts);
    double sum = 0.0;
    for (int64_t e = 0; e < experts; ++e) sum += p[size_t(e)] = std::exp(double(z[e]) - mx);
    for (double& x : p) x /= sum;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&](int32_t a, int32_t b) { return p[size_t(a)] > p[size_t(b)] || (p[size_t(a)] == p[size_t(b)] && a < b); });
    double kept = 0.0;
    for (int64_t j = 0; j < top_k; ++j) kept += p[size_t(order[size_t(j)])];
    for (int64_t j = 0; j < top_k; ++j) {
      const int32_t e = order[size_t(j)];
      r.token_expert[size_t(t * top_k + j)] = e;
      r.token_weight[size_t(t * top_k + j)] = static_cast<float>(renormalise ? p[size_t(e)] / kept : p[size_t(e)]);
      ++count[size_t(e)];
    }
  }
  r.expert_begin.assign(static_cast<size_t>(experts + 1), 0);
  for (int64_t e = 0; e < experts; ++e) r.expert_begin[size_t(e + 1)] = r.expert_begin[size_t(e)] + count[size_t(e)];
  r.slot_token.resize(slots);
  r.token_slot.resize(slots);
  std::vector<int64_t> next(r.expert_begin.begin(), r.expert_begin.end() - 1);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t slot = next[size_t(r.token_expert[size_t(t * top_k + j)])]++;
      r.slot_token[size_t(slot)] = t;
      r.token_slot[size_t(t * top_k + j)] = slot;
    }
  return r;
}

int64_t MoeScratch::bytes(DType activation) const {
  return logits_f32 * 4 + (gathered + gate_up + act + out) * static_cast<int64_t>(dtype_size(activation));
}

MoeScratch moe_scratch(const ModelConfig& c, const ShardPlacement& placement, int64_t rows) {
  MoeScratch s;
  if (c.num_experts <= 0 || rows <= 0) return s;
  const int64_t H = c.hidden_size, I = expert_inter_of_rank(c, placement).size();
  const int64_t slots = rows * std::min<int64_t>(c.experts_per_token, experts_of_rank(c, placement).size());
  const bool shared = c.shared_expert_intermediate_size > 0;
  const int64_t SI = shared_expert_inter_of_rank(c, placement).size();
  s.slots = slots;
  s.logits_f32 = rows * (c.num_experts + shared);
  s.gathered = slots * H;
  s.gate_up = slots * 2 * I + rows * 2 * SI;
  s.act = slots * I + rows * SI;
  s.out = (slots + 1 + (shared ? rows : 0)) * H;
  return s;
}

int64_t moe_routing_host_bytes(const ModelConfig& c, int64_t rows) {
  if (c.num_experts <= 0) return 0;
  const int64_t shared = c.shared_expert_intermediate_size > 0;
  const int64_t slots = rows * c.experts_per_token;
  // logits (float), slot_token / token_slot / local_slot (int64), token_weight / local_weight
  // (float), token_expert (int32), expert_begin; the shared expert's gate and local slot.
  return rows * c.num_experts * 4 + slots * (3 * 8 + 2 * 4 + 4) + (c.num_experts + 1) * 8 +
         shared * rows * (4 + 8 + 4);
}

BufferView MoeBlock::scratch(Backend& be, Buffer& b, size_t count, DType dtype) {
  return grow_scratch(be, b, count, dtype);
}

MoeBlock::~MoeBlock() {
  if (!load_ || load_->layer_steps == 0 || !std::getenv("TPBATCH_MOE_STATS")) return;
  const MoeLoad& l = *load_;
  log_info("moe routing (tp rank %d): %lld layer-steps; tokens per rank per layer-step under the "
               "expert split: max / mean = %.3f; experts run per layer-step on this rank: %.2f of %lld held",
               tp_rank_, static_cast<long long>(l.layer_steps), l.sum_max_rank_slots / l.sum_mean_rank_slots,
               l.sum_experts_run / static_cast<double>(l.layer_steps), static_cast<long long>(l.experts_held));
}

// Every rank routes identically, so each can count every rank's load under the expert split.
void MoeBlock::count_load(const LlamaShard& shard) {
  const ModelConfig& c = shard.config;
  const int t = shard.placement.tensor;
  MoeLoad& l = *load_;
  int64_t most = 0;
  for (int r = 0; r < t; ++r) {
    const Range e = balanced_split(c.num_experts, t, r);
    most = std::max(most, routing_.expert_begin[size_t(e.end)] - routing_.expert_begin[size_t(e.begin)]);
  }
  ++l.layer_steps;
  l.sum_max_rank_slots += static_cast<double>(most);
  l.sum_mean_rank_slots += static_cast<double>(routing_.tokens * routing_.top_k) / t;
  for (int64_t e = shard.expert_range.begin; e < shard.expert_range.end; ++e)
    l.sum_experts_run += routing_.expert_begin[size_t(e + 1)] > routing_.expert_begin[size_t(e)];
  l.experts_held = shard.expert_range.size();
  tp_rank_ = shard.placement.tp_rank;
}

// Router logits of every token (and the shared expert's gate), in F32, to the host (small: rows x
// experts), and the routing.
void MoeBlock::route(Backend& be, const LlamaShard& shard, const LayerShard& L, BufferView h, int64_t rows) {
  const ModelConfig& c = shard.config;
  const int64_t E1 = c.num_experts + !L.shared_gu.empty();
  const MoeScratch need = moe_scratch(c, shard.placement, rows);
  BufferView logits = scratch(be, logits_, static_cast<size_t>(need.logits_f32), DType::F32);
  linear(be, h, L.router, logits, rows, E1, c.hidden_size);
  host_logits_.resize(static_cast<size_t>(rows * E1));
  be.download(logits, host_logits_.data(), host_logits_.size() * sizeof(float));
  routing_ = route_tokens(host_logits_, rows, c.num_experts, c.experts_per_token, c.norm_topk_prob, E1);
  count_load(shard);
}

void MoeBlock::forward(Backend& be, Communicator& tp, const LlamaShard& shard, const LayerShard& L, BufferView h,
                       int64_t rows, BufferView out) {
  const ModelConfig& c = shard.config;
  const int64_t H = c.hidden_size, E = c.num_experts, k = c.experts_per_token, I = shard.expert_inter;
  const DType act = be.activation_dtype();
  if (rows == 0) return;
  const bool shared = !L.shared_gu.empty();
  const int64_t E1 = E + shared;
  const MoeScratch need = moe_scratch(c, shard.placement, rows);
  route(be, shard, L, h, rows);

  // This rank's experts' slots are consecutive (slots are grouped by expert, and the rank holds a
  // block of experts): [s0, s0 + n). Under the tensor split that is every slot.
  const Range held = shard.expert_range;
  const int64_t s0 = routing_.expert_begin[size_t(held.begin)];
  const int64_t n = routing_.expert_begin[size_t(held.end)] - s0;
  const bool every_slot = n == rows * k;
  BufferView gathered = scratch(be, gathered_, static_cast<size_t>(need.gathered), act);
  BufferView gu = scratch(be, gu_, static_cast<size_t>(need.gate_up), act);
  BufferView a = scratch(be, act_, static_cast<size_t>(need.act), act);
  BufferView y = scratch(be, expert_out_, static_cast<size_t>(need.out), act);
  if (n > 0) {
    // Tokens grouped by expert, then each expert's FFN on its group.
    be.copy_rows(h, H, std::span<const int64_t>(routing_.slot_token).subspan(size_t(s0), size_t(n)), H, gathered, H);
    for (int64_t e = held.begin; e < held.end; ++e) {
      const int64_t b = routing_.expert_begin[size_t(e)] - s0, m = routing_.expert_begin[size_t(e + 1)] - s0 - b;
      if (m == 0) continue;
      linear(be, gathered.at(b * H), L.expert_gu[size_t(e - held.begin)], gu.at(b * 2 * I), m, 2 * I, H);
    }
    be.silu_mul(gu, a, n, I);  // each slot's row is [gate | up] of its expert
    // Under the tensor split every rank holds a slice of every expert and every slot (the same n
    // on each); under the expert split a rank's slots are whole rows.
    const BufferView amax = shard.placement.experts == ExpertSplit::kTensor
                                ? expert_input_.whole_row_amax(be, tp, L.expert_down[0], a, n, I)
                                : BufferView{};
    for (int64_t e = held.begin; e < held.end; ++e) {
      const int64_t b = routing_.expert_begin[size_t(e)] - s0, m = routing_.expert_begin[size_t(e + 1)] - s0 - b;
      if (m == 0) continue;
      linear(be, a.at(b * I), L.expert_down[size_t(e - held.begin)], y.at(b * H), m, H, I,
             amax.empty() ? BufferView{} : amax.at(b));
    }
  }
  // The shared expert (Qwen2-MoE): this rank's slice of it on every token, its rows after the
  // zero row.
  const int64_t SI = shard.shared_inter_range.size();
  if (shared) {
    BufferView sgu = gu.at(need.slots * 2 * I), sa = a.at(need.slots * I);
    linear(be, h, L.shared_gu, sgu, rows, 2 * SI, H);
    be.silu_mul(sgu, sa, rows, SI);
    linear(be, sa, L.shared_down, y.at((n + 1) * H), rows, H, SI,
           shared_input_.whole_row_amax(be, tp, L.shared_down, sa, rows, SI));
  }
  // Each token: its k experts' outputs, weighted by the router. A choice of another rank's expert
  // reads a zero row with weight 0 (that rank adds it), so the allreduce sums each choice once.
  if (every_slot && !shared) {
    be.weighted_row_sum(y, routing_.token_slot, routing_.token_weight, k, H, out);
    return;
  }
  zeros_.assign(static_cast<size_t>(H) * dtype_size(act), 0);
  be.upload(y.at(n * H), zeros_.data(), zeros_.size());
  const int64_t per_token = k + shared;
  local_slot_.resize(static_cast<size_t>(rows * per_token));
  local_weight_.resize(static_cast<size_t>(rows * per_token));
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const size_t i = static_cast<size_t>(t * k + j), o = static_cast<size_t>(t * per_token + j);
      const int64_t slot = routing_.token_slot[i] - s0;
      const bool mine = slot >= 0 && slot < n;
      local_slot_[o] = mine ? slot : n;
      local_weight_[o] = mine ? routing_.token_weight[i] : 0.0f;
    }
    if (shared) {  // transformers: sigmoid(shared_expert_gate(h)) * shared_expert(h)
      const size_t o = static_cast<size_t>(t * per_token + k);
      local_slot_[o] = n + 1 + t;
      local_weight_[o] = static_cast<float>(1.0 / (1.0 + std::exp(-double(host_logits_[size_t(t * E1 + E)]))));
    }
  }
  be.weighted_row_sum(y, local_slot_, local_weight_, per_token, H, out);
}

}  // namespace tpbatch
