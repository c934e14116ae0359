#pragma once
// The sparse mixture-of-experts block of Mixtral and Qwen3-MoE, on one rank's shard:
//   router logits [rows, experts] (the router is replicated) -> softmax -> top-k -> (Mixtral always,
//   Qwen3-MoE when norm_topk_prob) renormalise -> tokens grouped by expert -> per expert: its
//   rows gathered, gate/up matmul, SiLU(gate) * up, down matmul -> each token's k outputs
//   weighted and summed.
// Each expert's gate/up rows and down columns are this rank's slice (the dense MLP's split), so
// the output is this rank's partial sum and the caller's one allreduce completes every expert at
// once. Every rank routes the same way: the router reads the hidden state the previous allreduce
// made identical on all of them.
// The routing is done on the host (the router's output is small: rows x experts floats), so each
// MoE layer downloads it once: a synchronisation per layer on an asynchronous backend (CUDA).
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/llama_shard.h"

namespace tpbatch {

// Which experts each token goes to, grouped by expert.
struct MoeRouting {
  int64_t tokens = 0, experts = 0, top_k = 0;
  std::vector<int64_t> expert_begin;   // [experts + 1]: expert e's slots are [begin[e], begin[e+1])
  std::vector<int64_t> slot_token;     // [tokens * top_k]: the token in each slot, by expert then token
  std::vector<int64_t> token_slot;     // [tokens * top_k]: token i's j-th choice's slot (j by falling weight)
  std::vector<float> token_weight;     // [tokens * top_k]: its routing weight
  std::vector<int32_t> token_expert;   // [tokens * top_k]: its expert
};

// transformers' routing: softmax over the experts (in double here), the top_k largest (ties to
// the lower expert id), divided by their sum when `renormalise`. logits: [tokens][experts].
MoeRouting route_tokens(std::span<const float> logits, int64_t tokens, int64_t experts, int64_t top_k,
                        bool renormalise);

// The block's scratch memory, grown to the largest step seen, and its forward pass.
class MoeBlock {
 public:
  // out[rows, H] = this rank's partial MoE output for the normed hidden state h[rows, H].
  void forward(Backend& be, const LlamaShard& shard, const LayerShard& layer, BufferView h, int64_t rows,
               BufferView out);
  const MoeRouting& last_routing() const { return routing_; }

 private:
  BufferView scratch(Backend& be, Buffer& b, size_t count, DType dtype);
  Buffer logits_, gathered_, gu_, act_, expert_out_;
  std::vector<float> host_logits_;
  MoeRouting routing_;
};

}  // namespace tpbatch
