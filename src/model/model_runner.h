#pragma once
// Runs one engine step through this rank's model shard: embedding, the decoder layers with their
// two tensor-parallel allreduces each, and the vocab-parallel LM head, whose greedy argmax and
// log-softmax normalizer are combined across shards without gathering full logits.
#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "model/llama_shard.h"
#include "model/step_inputs.h"
#include "topology/communicator.h"

namespace tpbatch {

class ModelRunner {
 public:
  // kv_blocks: KV cache capacity in blocks of block_size tokens (every rank of a replica the same).
  ModelRunner(LlamaShard shard, Backend& backend, Communicator& tp, int64_t kv_blocks, int64_t block_size);

  // The whole step on a single-stage shard. results: one per inputs.logits entry; full_logits:
  // [count of `full` requests][vocab], in order.
  void step(const StepInputs& inputs, std::vector<LogitResult>& results, std::vector<float>& full_logits);

  // Pipeline stages: the first embeds, others start from the hidden state the previous stage sent
  // (written into hidden_input()); every stage runs its layers; the last computes the logits.
  void run_stage(const StepInputs& inputs);
  float* hidden_input(int64_t rows);
  const float* hidden() const { return x_.data(); }
  void compute_logits(const StepInputs& inputs, std::vector<LogitResult>& results, std::vector<float>& full_logits);
  bool first_stage() const { return shard_.placement.has_embedding; }
  bool last_stage() const { return shard_.placement.has_lm_head; }

  const LlamaShard& shard() const { return shard_; }
  const KvLayout& kv_layout() const { return kv_; }
  size_t kv_cache_bytes() const;
  // Per rank, K and V, fp32, for `layers` layers.
  static int64_t kv_bytes_per_token(const ModelConfig& config, int tensor, int64_t layers);

 private:
  void layer_forward(size_t layer, int64_t rows, const std::vector<AttentionSeq>& seqs);

  LlamaShard shard_;
  Backend& be_;
  Communicator& tp_;
  KvLayout kv_;
  std::vector<std::vector<float>> k_cache_, v_cache_;  // per layer
  // Step scratch, grown to the largest step seen.
  std::vector<float> x_, h_, qkv_, attn_, proj_, gu_, act_, logits_;
};

}  // namespace tpbatch
