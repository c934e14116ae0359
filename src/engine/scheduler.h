#pragma once
// Continuous batching over the paged KV cache (vLLM-style): every step takes one token from each
// decoding sequence, then prefill chunks, then admits waiting sequences, all under max_seqs and
// max_batch_tokens. When blocks run out, the newest running sequence is preempted and later
// recomputed from its tokens, which gives the same KV and so the same results.
// Phi-3 longrope: Hugging Face turns a sequence longer than the original context by the long
// factors at every position, so a sequence that grows past it is computed again from its first
// token with them (once); one longer from the start uses them from the start.
// Under pipeline parallelism several steps are in flight at once: a sequence in an unfinished
// step is neither scheduled again nor preempted until that step's results are applied.
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "engine/kv_block_allocator.h"
#include "engine/sequence.h"
#include "engine/step_chunk.h"
#include "model/step_inputs.h"

namespace tpbatch {

struct SchedulerLimits {
  int64_t max_seqs = 64;
  int64_t max_batch_tokens = 4096;
  int64_t pipeline_stages = 1;     // micro-batches: each step takes 1/stages of the active sequences
  bool longest_first = false;      // admit the longest waiting prompt first (packs prefill, less tail)
  // Rows that draw_on_backend() are drawn where the logits are (StepInputs::draws; the runner
  // needs its host draw set): only their tokens come back. Off, they bring their full logits.
  bool backend_draws = false;
  int64_t long_rope_after = 0;     // rope_long_factors_after(config): 0, or longer sequences use the long factors
};

class Scheduler {
 public:
  Scheduler(SchedulerLimits limits, KvBlockAllocator& allocator);

  void add(std::unique_ptr<Sequence> seq);
  bool idle() const { return running_.empty() && waiting_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  int64_t preemptions() const { return preemptions_; }
  int64_t prefix_cache_hit_tokens() const { return prefix_cache_hit_tokens_; }  // tokens served by the prefix cache
  // Cached tokens computed again because their sequence outgrew the short rope factors.
  int64_t long_rope_recomputed_tokens() const { return long_rope_recomputed_tokens_; }

  // The next step; empty when nothing can run. Sequences that cannot fit the KV cache even alone
  // come back through take_finished() with an error.
  StepInputs schedule();
  // The oldest step in flight is back: its rows count as computed, and its chunks go to the output
  // processor, which gives them their meaning (OutputProcessor::process).
  std::vector<StepChunk> complete_step();
  // Then the books: the sequences the output processor finished release their KV blocks and leave
  // the running list.
  void update(const std::vector<StepChunk>& step);
  // Sequences finished since the last call (their blocks already released).
  std::vector<std::unique_ptr<Sequence>> take_finished();

  size_t steps_in_flight() const { return in_flight_.size(); }

 private:
  std::deque<std::unique_ptr<Sequence>>::iterator next_to_admit();
  void add_chunk(StepInputs& in, std::vector<StepChunk>& step, Sequence& seq, int64_t n);
  bool reserve(size_t index, int64_t tokens);  // grows blocks, preempting newer idle sequences if needed
  void preempt(size_t running_index);
  // Longrope: a sequence longer than long_rope_after turns by the long factors; the K/V it has
  // cached with the short ones are dropped, to be computed again.
  void follow_rope_length(Sequence& seq);
  // Admission: shares the cached blocks of the sequence's leading tokens and starts it after them;
  // false (nothing shared) when it should wait for a running sequence to compute more of them.
  bool share_cached_prefix(Sequence& seq);
  void finish(Sequence& seq, FinishReason reason);  // output side done, blocks released

  SchedulerLimits limits_;
  KvBlockAllocator& alloc_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;   // admission order: oldest first
  std::vector<std::unique_ptr<Sequence>> finished_;
  std::deque<std::vector<StepChunk>> in_flight_;  // oldest step first
  int64_t preemptions_ = 0;
  int64_t prefix_cache_hit_tokens_ = 0;
  int64_t long_rope_recomputed_tokens_ = 0;
};

}  // namespace tpbatch
