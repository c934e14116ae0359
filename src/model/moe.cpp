#include "model/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "common/error.h"

namespace tpbatch {

MoeRouting route_tokens(std::span<const float> logits, int64_t tokens, int64_t experts, int64_t top_k,
                        bool renormalise) {
  if (experts <= 0 || top_k <= 0 || top_k > experts || static_cast<int64_t>(logits.size()) != tokens * experts)
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
    const float* z = logits.data() + t * experts;
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

BufferView MoeBlock::scratch(Backend& be, Buffer& b, size_t count, DType dtype) {
  if (b.count() < count || b.dtype() != dtype) b = be.alloc(std::max(count, b.count() + b.count() / 4), dtype);
  return b.view();
}

void MoeBlock::forward(Backend& be, const LlamaShard& shard, const LayerShard& L, BufferView h, int64_t rows,
                       BufferView out) {
  const ModelConfig& c = shard.config;
  const int64_t H = c.hidden_size, E = c.num_experts, k = c.experts_per_token, I = shard.expert_inter;
  const DType act = be.activation_dtype();
  if (rows == 0) return;
  // Router logits of every token, in F32, to the host (small: rows x experts).
  BufferView logits = scratch(be, logits_, static_cast<size_t>(rows * E), DType::F32);
  be.matmul_nt(h, L.router.view(), logits, rows, E, H);
  host_logits_.resize(static_cast<size_t>(rows * E));
  be.download(logits, host_logits_.data(), host_logits_.size() * sizeof(float));
  routing_ = route_tokens(host_logits_, rows, E, k, c.norm_topk_prob);

  // Tokens grouped by expert, then each expert's FFN on its group (its slice of this rank).
  const size_t slots = static_cast<size_t>(rows * k);
  BufferView gathered = scratch(be, gathered_, slots * H, act);
  BufferView gu = scratch(be, gu_, slots * 2 * I, act);
  BufferView a = scratch(be, act_, slots * I, act);
  BufferView y = scratch(be, expert_out_, slots * H, act);
  be.copy_rows(h, H, routing_.slot_token, H, gathered, H);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = routing_.expert_begin[size_t(e)], n = routing_.expert_begin[size_t(e + 1)] - b;
    if (n == 0) continue;
    be.matmul_nt(gathered.at(b * H), L.expert_gu[size_t(e)].view(), gu.at(b * 2 * I), n, 2 * I, H);
  }
  be.silu_mul(gu, a, static_cast<int64_t>(slots), I);  // each slot's row is [gate | up] of its expert
  for (int64_t e = 0; e < E; ++e) {
    const int64_t b = routing_.expert_begin[size_t(e)], n = routing_.expert_begin[size_t(e + 1)] - b;
    if (n == 0) continue;
    be.matmul_nt(a.at(b * I), L.expert_down[size_t(e)].view(), y.at(b * H), n, H, I);
  }
  // Each token: its k experts' outputs, weighted by the router.
  be.weighted_row_sum(y, routing_.token_slot, routing_.token_weight, k, H, out);
}

}  // namespace tpbatch
