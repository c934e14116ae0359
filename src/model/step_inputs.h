#pragma once
// What one engine step asks of the model: the tokens of every scheduled sequence (prefill chunks
// and single decode tokens mixed), where each sits in the paged KV cache, and which rows need
// logits. Built by the scheduler on the replica leader and broadcast to its peers.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/token_mask.h"

namespace tpbatch {

struct LogitRequest {
  int64_t row = 0;        // row of the step
  int32_t target = -1;    // token whose logit is wanted (scoring, or the sampled token later), -1 none
  bool full = false;      // the sampler needs this row's full logits
};

// A requested row whose token the backend draws where the logits are (it needs nothing but them
// and these parameters): only the token comes back.
struct DrawRequest {
  int64_t request = 0;    // index into StepInputs::logits
  DrawParams params;
};

// Logits of one requested row, combined over the vocabulary shards without gathering them.
struct LogitResult {
  int32_t argmax = 0;       // lowest id among the maxima
  float max_logit = 0;
  float log_z = 0;          // log-sum-exp over the whole vocabulary
  float target_logit = 0;   // NaN when no target was given
  int32_t token = -1;       // drawn on the backend (a DrawRequest), else -1; set on the TP group's first rank
  float token_logit = 0;    // that token's logit
  // Rows with a TokenMask: the lowest-id maximum over the allowed tokens (-1: none allowed) and
  // its logit; the fields above stay those of the unmasked logits (the recorded logprob's log_z).
  int32_t allowed_argmax = -1;
  float allowed_max_logit = 0;
};

// task: embed: the sum of the final-normed hidden states of rows [row, row + num_rows) of the step
// (one prompt's rows that its pooling reads; embedding_pooling.h).
struct EmbedRequest {
  int64_t row = 0;
  int64_t num_rows = 0;
};

struct StepSeqSlice {
  int64_t num_rows = 0;
  int64_t pos_begin = 0;
  int64_t blocks_begin = 0;  // into StepInputs::block_ids
  int64_t num_blocks = 0;
};

struct StepInputs {
  std::vector<int32_t> tokens;       // [rows]
  std::vector<int32_t> positions;    // [rows]
  std::vector<int32_t> rope_tables;  // [rows] or empty: StepBatch::rope_tables (1: longrope's long factors)
  std::vector<StepSeqSlice> seqs;    // rows are laid out sequence after sequence
  std::vector<int32_t> block_ids;
  std::vector<LogitRequest> logits;
  std::vector<EmbedRequest> embeds;
  std::vector<DrawRequest> draws;    // in request order
  std::vector<TokenMask> masks;      // constrained rows' allowed tokens, in request order (never `full` rows)
  std::vector<uint64_t> mask_words;  // their bits

  TokenMaskWriter mask_writer() { return TokenMaskWriter(masks, mask_words); }
  TokenMaskBits mask_bits(const TokenMask& m) const { return {mask_words.data() + m.word_begin, m.num_words}; }

  int64_t rows() const { return static_cast<int64_t>(tokens.size()); }
  void clear();
  // For the attention kernel: pointers into block_ids, row offsets accumulated.
  std::vector<AttentionSeq> attention_seqs() const;

  std::string serialize() const;
  static StepInputs deserialize(const std::string& bytes);
};

}  // namespace tpbatch
