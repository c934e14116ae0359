#pragma once
// The output side of a replica, the counterpart of RowAdmitter: what one step's logits mean for
// each sequence. A scored sequence records the logprob of each target token; a generating one
// gets its next token (greedy or sampled, after penalties and masks), its logprob and top
// alternatives, and is finished when it produced EOS, a stop token or stop string, or reached its
// length. The scheduler only keeps the books (KV blocks, running and finished lists).
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/sequence.h"
#include "engine/step_chunk.h"
#include "model/step_inputs.h"

namespace tpbatch {

// Whether the step that picks this sequence's next token must bring its full logits to the host
// (sampling, penalties, min_tokens masking, top_logprobs), unless the backend draws the token
// (draws_on_backend); otherwise the argmax is enough.
bool needs_full_logits(const Sequence& seq);

// Whether its next token is a sampled draw from the logits and sampling parameters alone, which
// the backend takes where the logits are (Backend::sample_rows), and with what parameters.
bool draws_on_backend(const Sequence& seq);
DrawParams draw_params(const Sequence& seq);

// The host's draw behind Backend::sample_rows: sample_token with the row's parameters.
int32_t draw_on_host(const float* logits, int64_t vocab, const DrawParams& params, float row_max);

// Ends a sequence with `reason` (length | eos | stop | scored), its final text flushed. Its KV
// blocks are the scheduler's to release.
void finish_sequence(Sequence& seq, FinishReason reason);

// What a generating sequence produces at this step, from its logits alone: its next token, the
// model's unmodified logit of it, and its top_logprobs alternatives.
struct TokenChoice {
  int32_t token = 0;
  float logit = 0;
  std::vector<std::pair<int32_t, float>> alternatives;
};

class OutputProcessor {
 public:
  // A completed step (Scheduler::complete_step: its rows counted as computed), chunk by chunk in
  // step order: an embed chunk adds to its pooled sum, a scoring chunk records its logprobs, a
  // generating one gets its next token (the step's generating rows chosen on OpenMP's threads: a
  // row's choice reads only its own sequence and logits, so it is the same at any thread count).
  // Finishes the sequences the step ends; their blocks are the scheduler's to release.
  void process(const std::vector<StepChunk>& step, const StepResults& out, int64_t vocab, int64_t hidden);

  // A scoring chunk's results, one per target token in order; finishes the sequence ("scored")
  // once every position has been computed.
  void score(Sequence& seq, std::span<const LogitResult> results);

  // A generating sequence's next token from its result (argmax and log-normalizer over the whole
  // vocabulary, and the token when the backend drew it) and, when needs_full_logits() asked for
  // them, its full logits [vocab]: choose, then accept.
  void generate(Sequence& seq, const LogitResult& result, const float* full_logits, int64_t vocab);

  // The choice alone: reads the sequence, changes nothing, and depends on nothing else (the draw is
  // keyed by the sequence's line, sample and step), so a step's rows may be chosen on parallel
  // threads in any order.
  static TokenChoice choose(const Sequence& seq, const LogitResult& result, const float* full_logits, int64_t vocab);

  // Appends the chosen token (its logprob, alternatives) and finishes the sequence if it ends it.
  // The row stays greedy (/is_greedy) while every token is the model's argmax.
  void accept(Sequence& seq, const LogitResult& result, const TokenChoice& choice);
};

}  // namespace tpbatch
