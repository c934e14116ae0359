#pragma once
// The sparse mixture-of-experts block of Mixtral, Qwen3-MoE and Qwen2-MoE, on one rank's shard:
//   router logits [rows, experts] (the router is replicated) -> softmax -> top-k -> (Mixtral always,
//   Qwen-MoE when norm_topk_prob) renormalise -> tokens grouped by expert -> per expert: its
//   rows gathered, gate/up matmul, SiLU(gate) * up, down matmul -> each token's k outputs
//   weighted and summed. Qwen2-MoE adds a shared expert that every token passes through, weighted
//   by sigmoid(shared_expert_gate . h): its gate row rides with the router's (one download), the
//   rank holds a slice of it like the dense MLP, and its output joins the same weighted sum.
// The rank holds the experts of LlamaShard::expert_range (model/shard_placement.h):
//   parallel.experts: tensor  every expert, its gate/up rows and down columns of this rank (the
//                             dense MLP's split): the output is this rank's partial sum of every
//                             expert's output;
//   parallel.experts: expert  a block of whole experts: the rank runs only the tokens routed to them
//                             and its output is the sum over its experts (zero for the others').
// Either way the caller's one allreduce completes the layer, and no tokens are exchanged: every
// rank routes the same way, the router reading the hidden state the previous allreduce made
// identical on all of them.
// The routing is done on the host (the router's output is small: rows x experts floats), so each
// MoE layer downloads it once: a synchronisation per layer on an asynchronous backend (CUDA).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "model/llama_shard.h"
#include "model/row_parallel_input.h"

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
// the lower expert id), divided by their sum when `renormalise`. logits: [tokens][stride], the
// experts' first (stride 0 = experts).
MoeRouting route_tokens(std::span<const float> logits, int64_t tokens, int64_t experts, int64_t top_k,
                        bool renormalise, int64_t stride = 0);

// The block's backend scratch for a step of `rows` tokens, in elements of its dtype: what
// MoeBlock::forward allocates (at least), and what `tpbatch plan` counts.
//   logits     rows x (experts + shared), F32 (the router's output, and the shared expert's gate)
//   gathered   slots x H          each slot's token row
//   gate/up    slots x 2 inter    this rank's width of each expert (all of it under expert)
//              + rows x 2 shared  and of the shared expert (Qwen2-MoE)
//   act        slots x inter + rows x shared
//   out        (slots + 1 + rows if shared) x H    the experts' outputs, a zero row for the slots
//                                 of other ranks, the shared expert's outputs
// in the activation dtype, where slots = rows x min(top_k, experts held): a token can reach at
// most that many of this rank's experts.
struct MoeScratch {
  int64_t logits_f32 = 0, gathered = 0, gate_up = 0, act = 0, out = 0;
  int64_t slots = 0;  // the routed slots the others are sized for; the shared expert's rows follow
  int64_t bytes(DType activation) const;
};
MoeScratch moe_scratch(const ModelConfig& config, const ShardPlacement& placement, int64_t rows);
// The host routing of a step (logits downloaded, MoeRouting's vectors), bytes.
int64_t moe_routing_host_bytes(const ModelConfig& config, int64_t rows);

// Tokens per rank per MoE layer-step, for the routing's load imbalance under the expert split
// (the rank whose experts are most popular sets the step's pace): summed over the steps seen.
struct MoeLoad {
  int64_t layer_steps = 0;
  double sum_max_rank_slots = 0, sum_mean_rank_slots = 0;  // under the expert split's partition
  double sum_experts_run = 0;   // experts of this rank with at least one token, per layer-step
  int64_t experts_held = 0;
};

// The block's scratch memory, grown to the largest step seen, and its forward pass.
class MoeBlock {
 public:
  MoeBlock() = default;
  MoeBlock(MoeBlock&&) = default;
  MoeBlock& operator=(MoeBlock&&) = default;
  // With TPBATCH_MOE_STATS set, prints the routing's load (MoeLoad) to stderr: a measurement aid.
  ~MoeBlock();

  // out[rows, H] = this rank's partial MoE output for the normed hidden state h[rows, H]. tp: the
  // group the experts are split over (W8A8 experts under the tensor split agree on their inputs'
  // row scales there, model/row_parallel_input.h).
  void forward(Backend& be, Communicator& tp, const LlamaShard& shard, const LayerShard& layer, BufferView h,
               int64_t rows, BufferView out);
  const MoeRouting& last_routing() const { return routing_; }
  const MoeLoad& load() const { return *load_; }

 private:
  BufferView scratch(Backend& be, Buffer& b, size_t count, DType dtype);
  void route(Backend& be, const LlamaShard& shard, const LayerShard& layer, BufferView h, int64_t rows);
  void count_load(const LlamaShard& shard);
  Buffer logits_, gathered_, gu_, act_, expert_out_;
  RowParallelInput expert_input_, shared_input_;  // the down projections' W8A8 input scales
  std::vector<float> host_logits_;
  std::vector<int64_t> local_slot_;    // token_slot in this rank's slots (the zero row for other ranks')
  std::vector<float> local_weight_;    // token_weight, 0 for other ranks' experts
  std::vector<char> zeros_;
  MoeRouting routing_;
  std::unique_ptr<MoeLoad> load_ = std::make_unique<MoeLoad>();  // null once moved from: reported once
  int tp_rank_ = 0;
};

}  // namespace tpbatch
