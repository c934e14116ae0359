#pragma once
// Runs one engine step through this rank's model shard: embedding, the decoder layers with their
// two tensor-parallel allreduces each, and the vocab-parallel LM head, whose greedy argmax and
// log-softmax normalizer are combined across shards without gathering full logits.
// Everything it computes on is backend memory; it downloads only the per-row LM-head statistics,
// the tokens of rows the backend draws (StepInputs::draws), and the full logits of rows whose
// token the host must choose (penalties, top logprobs). A constrained row's allowed tokens come
// with the step (StepInputs::masks) and each rank masks its own vocabulary shard.
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "model/llama_shard.h"
#include "model/moe.h"
#include "model/row_parallel_input.h"
#include "model/step_inputs.h"

namespace tpbatch {

class ModelRunner {
 public:
  // kv: the paged cache's geometry (num_blocks, block_size, dtype; heads and head_dim are filled
  // in from the shard). Every rank of a replica has the same number of blocks.
  ModelRunner(LlamaShard shard, Backend& backend, Communicator& tp, KvLayout kv);

  // The whole step on a single-stage shard. results: one per inputs.logits entry; full_logits:
  // [count of `full` requests][vocab], in order.
  void step(const StepInputs& inputs, std::vector<LogitResult>& results, std::vector<float>& full_logits);

  // Pipeline stages: the first embeds, others start from the hidden state the previous stage sent
  // (received into hidden_input()); every stage runs its layers; the last computes the logits.
  void run_stage(const StepInputs& inputs);
  BufferView hidden_input(int64_t rows);
  BufferView hidden() const { return x_.view(); }
  size_t hidden_bytes(int64_t rows) const;
  void compute_logits(const StepInputs& inputs, std::vector<LogitResult>& results, std::vector<float>& full_logits);
  // task: embed, on the last stage: per inputs.embeds entry the sum of its rows' hidden states after
  // the final norm ([count of embeds][hidden_size], float32). The hidden state is replicated over
  // the TP group, so any one rank can compute it (no collectives).
  void compute_embeddings(const StepInputs& inputs, std::vector<float>& sums);
  // The host's draw (the engine's sampler), which the backend runs on rows it cannot draw itself
  // (all of them on the CPU). Required once a step has draws.
  void set_host_draw(HostDraw draw) { host_draw_ = std::move(draw); }
  bool first_stage() const { return shard_.placement.has_embedding; }
  bool last_stage() const { return shard_.placement.has_lm_head; }

  const LlamaShard& shard() const { return shard_; }
  const KvLayout& kv_layout() const { return kv_; }
  size_t kv_cache_bytes() const;
  // Per rank, K and V, for `layers` layers, in the cache dtype.
  static int64_t kv_bytes_per_token(const ModelConfig& config, int tensor, int64_t layers, DType kv_dtype);

 private:
  void layer_forward(size_t layer, int64_t rows);
  // The step's rope_tables: one a row (or none), each a table the shard's frequencies hold.
  void check_rope_tables(const StepInputs& inputs) const;
  void draw_pass(const StepInputs& inputs, int64_t p0, int64_t n, BufferView logits, std::vector<LogitResult>& results);
  // The full logits of the pass's rows that ask for them, whole rows at dst (the TP shards
  // gathered); returns how many rows it wrote.
  int64_t gather_full_logits(const StepInputs& inputs, int64_t p0, int64_t n, BufferView logits, float* dst);
  // The pass's rows with a TokenMask (StepInputs::masks), and their masked statistics.
  int64_t pass_masks(const StepInputs& inputs, int64_t p0, int64_t n);
  void mask_pass(const StepInputs& inputs, int64_t p0, BufferView logits, BufferView masked_stats);
  BufferView scratch(Buffer& b, size_t count, DType dtype);

  LlamaShard shard_;
  Backend& be_;
  Communicator& tp_;
  KvLayout kv_;
  std::vector<KvLayout> layer_kv_;  // per local layer: kv_ with the layer's window, score scale and soft-cap
  DType act_;
  std::vector<Buffer> k_cache_, v_cache_;  // per layer
  // Step scratch in backend memory, grown to the largest step seen.
  Buffer x_, h_, qkv_, attn_, proj_, gu_, act_buf_, hrows_, normed_, logits_, stats_, all_stats_, pad_, gathered_, whole_;
  Buffer mask_words_, masked_;  // the pass's masked rows: their shard's mask bits, and the logits masked
  // Host copies of what the step sends to the backend (kept to avoid reallocating each step).
  std::vector<AttentionSeq> seqs_;
  std::vector<int64_t> logit_rows_;
  std::vector<int32_t> logit_targets_;
  std::vector<int64_t> embed_rows_;
  HostDraw host_draw_;
  std::vector<int64_t> draw_rows_, whole_rows_;  // this pass's drawn rows (of its logits buffer), 0..count
  std::vector<DrawParams> draw_params_;
  std::vector<float> draw_max_;
  std::vector<DrawnToken> drawn_;
  std::vector<int64_t> full_rows_;     // this pass's rows (of its logits buffer) whose full logits are wanted
  std::vector<float> gathered_host_;   // their shards, gathered
  std::vector<int64_t> mask_rows_;     // this pass's masked rows (of its logits buffer), in request order
  std::vector<int64_t> mask_of_request_;  // per row of the pass: its index in mask_rows_, or -1
  std::vector<const TokenMask*> pass_mask_of_;  // per mask_rows_ entry: its mask
  std::vector<LogitResult*> masked_results_;
  std::vector<uint64_t> mask_words_host_;
  std::vector<uint16_t> embed_host16_;
  std::vector<float> embed_host_;
  MoeBlock moe_;  // mixture-of-experts layers' scratch (Mixtral, Qwen3-MoE)
  RowParallelInput row_parallel_input_;  // o_proj's and down_proj's W8A8 input scales
};

}  // namespace tpbatch
