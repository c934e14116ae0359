#include "engine/scheduler.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "engine/constrained_choice.h"
#include "engine/output_processor.h"
#include "engine/prefix_cache.h"

namespace tpbatch {

Scheduler::Scheduler(SchedulerLimits limits, KvBlockAllocator& allocator) : limits_(limits), alloc_(allocator) {}

void Scheduler::add(std::unique_ptr<Sequence> seq) {
  // A prompt that cannot fit the whole cache would wait forever: fail the row instead.
  const int64_t need = alloc_.blocks_for(seq->prompt_len + 1);
  if (need > alloc_.num_blocks()) {
    seq->finish_reason = FinishReason::kError;
    seq->error = "input line " + std::to_string(seq->line + 1) + ": prompt of " + std::to_string(seq->prompt_len) + " tokens does not fit the KV cache (" +
                std::to_string(alloc_.num_blocks() * alloc_.block_size()) + " tokens; raise engine.kv_cache_tokens)";
    finished_.push_back(std::move(seq));
    return;
  }
  waiting_.push_back(std::move(seq));
}

void Scheduler::preempt(size_t i) {
  std::unique_ptr<Sequence> seq = std::move(running_[i]);
  running_.erase(running_.begin() + static_cast<std::ptrdiff_t>(i));
  alloc_.release(seq->blocks);
  seq->num_computed = 0;  // recompute from its tokens when readmitted
  seq->preempted = true;
  waiting_.push_front(std::move(seq));
  ++preemptions_;
}

void Scheduler::follow_rope_length(Sequence& seq) {
  if (limits_.long_rope_after == 0 || seq.long_rope || static_cast<int64_t>(seq.tokens.size()) <= limits_.long_rope_after)
    return;
  seq.long_rope = true;
  long_rope_recomputed_tokens_ += seq.num_computed;
  alloc_.release(seq.blocks);
  seq.num_computed = 0;
}

bool Scheduler::reserve(size_t index, int64_t tokens) {
  Sequence& seq = *running_[index];
  while (!alloc_.grow(seq.blocks, tokens)) {
    size_t victim = running_.size();  // the newest sequence after this one that is not in flight
    for (size_t j = running_.size(); j-- > index + 1;)
      if (!running_[j]->in_flight) {
        victim = j;
        break;
      }
    if (victim == running_.size()) return false;
    preempt(victim);
  }
  return true;
}

void Scheduler::add_chunk(StepInputs& in, std::vector<StepChunk>& step, Sequence& s, int64_t n) {
  const int64_t row0 = in.rows(), p0 = s.num_computed;
  StepSeqSlice slice;
  slice.num_rows = n;
  slice.pos_begin = p0;
  slice.blocks_begin = static_cast<int64_t>(in.block_ids.size());
  slice.num_blocks = static_cast<int64_t>(s.blocks.size());
  in.seqs.push_back(slice);
  in.block_ids.insert(in.block_ids.end(), s.blocks.begin(), s.blocks.end());
  for (int64_t i = 0; i < n; ++i) {
    in.tokens.push_back(s.tokens[p0 + i]);
    in.positions.push_back(static_cast<int32_t>(p0 + i));
    if (limits_.long_rope_after > 0) in.rope_tables.push_back(s.long_rope ? 1 : 0);
  }
  StepChunk e{&s, n, 0, false, false};
  const int64_t total = static_cast<int64_t>(s.tokens.size());
  if (s.embedding) {  // prefill only, no logits: the rows this chunk adds to the pooled embedding
    if (p0 == 0) s.embedding_sum.reset();  // (re)computed from the first token
    if (const auto pr = pooled_rows(s.pooling, p0, n, total)) {
      in.embeds.push_back(EmbedRequest{row0 + pr->first, pr->count});
      e.num_requests = 1;
    }
    s.in_flight = true;
    step.push_back(e);
    return;
  }
  if (s.scoring) {
    // Position p predicts token p+1; skip what an earlier (preempted) pass already scored.
    const int64_t next_target = s.score_from + static_cast<int64_t>(s.logprobs.size());
    for (int64_t i = 0; i < n; ++i) {
      const int64_t target = p0 + i + 1;
      if (target >= next_target && target < total) {
        in.logits.push_back(LogitRequest{row0 + i, s.tokens[target], false});
        ++e.num_requests;
      }
    }
  } else if (p0 + n == total) {
    e.drawn = limits_.backend_draws && draws_on_backend(s);
    e.full = needs_full_logits(s) && !e.drawn;
    const int64_t request = static_cast<int64_t>(in.logits.size());
    if (e.drawn) in.draws.push_back(DrawRequest{request, draw_params(s)});
    in.logits.push_back(LogitRequest{row0 + n - 1, -1, e.full});
    if (!e.full && constraint_applies(s)) add_constraint_mask(s, request, in);  // masked on the vocabulary shards
    e.num_requests = 1;
    e.samples = true;
  }
  s.in_flight = true;
  step.push_back(e);
}

// FIFO, except that with longest_first the longest prompt among the waiting rows goes first;
// preempted sequences (with KV to recompute) always go first, so they cannot starve.
std::deque<std::unique_ptr<Sequence>>::iterator Scheduler::next_to_admit() {
  auto best = waiting_.begin();
  if (!limits_.longest_first || (*best)->num_generated() > 0 || (*best)->preempted) return best;
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it)
    if ((*it)->tokens.size() > (*best)->tokens.size()) best = it;
  return best;
}

StepInputs Scheduler::schedule() {
  StepInputs in;
  std::vector<StepChunk> step;
  int64_t budget = limits_.max_batch_tokens;
  // Under PP the active sequences are split into one micro-batch per stage (as vLLM's virtual engines).
  const int64_t active = std::min<int64_t>(limits_.max_seqs, static_cast<int64_t>(running_.size() + waiting_.size()));
  const int64_t per_step = std::max<int64_t>(1, (active + limits_.pipeline_stages - 1) / limits_.pipeline_stages);
  auto room = [&] { return budget > 0 && static_cast<int64_t>(step.size()) < per_step; };
  bool any_in_flight = false;
  for (const auto& s : running_) any_in_flight |= s->in_flight;

  // Running sequences first, oldest first: decodes take one token, prefills the next chunk.
  for (size_t i = 0; i < running_.size() && room(); ++i) {
    Sequence& s = *running_[i];
    if (s.in_flight) continue;
    follow_rope_length(s);
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()) - s.num_computed, budget);
    if (!reserve(i, s.num_computed + n)) {
      if (any_in_flight) continue;  // blocks come back as steps in flight finish
      if (running_.size() == 1) {   // alone and still too big: the cache bounds its length
        finish(s, FinishReason::kLength);
        finished_.push_back(std::move(running_[i]));
        running_.clear();
        break;
      }
      preempt(i);
      break;
    }
    add_chunk(in, step, s, n);
    budget -= n;
  }
  // Then admit waiting sequences while blocks, sequence slots and token budget allow.
  while (!waiting_.empty() && static_cast<int64_t>(running_.size()) < limits_.max_seqs && room()) {
    auto next = next_to_admit();
    Sequence& s = **next;
    follow_rope_length(s);  // before any sharing: nothing is cached yet
    if (!share_cached_prefix(s)) break;  // a running sequence is computing the blocks it can share
    const int64_t n = std::min<int64_t>(static_cast<int64_t>(s.tokens.size()) - s.num_computed, budget);
    if (!alloc_.grow(s.blocks, s.num_computed + n)) {
      alloc_.release(s.blocks);
      s.num_computed = 0;
      break;
    }
    if (!s.preempted) s.prompt_tokens_cached = std::min(s.num_computed, s.prompt_len);
    prefix_cache_hit_tokens_ += s.num_computed;
    running_.push_back(std::move(*next));
    waiting_.erase(next);
    add_chunk(in, step, s, n);
    budget -= n;
  }
  // Publish the blocks this step fills: a later step, on every rank after this one, can read them.
  // Not those turned by longrope's long factors: the cache is keyed by tokens alone, and every
  // other sequence wants the short ones there.
  for (const StepChunk& e : step)
    if (!e.seq->long_rope) alloc_.register_full_blocks(e.seq->blocks, e.seq->tokens, e.seq->num_computed + e.num_rows);
  if (!step.empty()) in_flight_.push_back(std::move(step));
  return in;
}

bool Scheduler::share_cached_prefix(Sequence& s) {
  if (!alloc_.prefix_caching() || !s.blocks.empty() || s.num_computed != 0) return true;
  const int64_t limit = prefix_cache_limit(s, alloc_.block_size());
  if (limit == 0) return true;
  const int64_t hit = alloc_.share_cached_prefix(s.blocks, s.tokens, limit);
  if (hit < limit && prefix_block_being_computed(s, hit, limit, running_, alloc_.block_size())) {
    alloc_.release(s.blocks);
    return false;
  }
  s.num_computed = hit;
  return true;
}

void Scheduler::finish(Sequence& seq, FinishReason reason) {
  finish_sequence(seq, reason);
  alloc_.release(seq.blocks);
}

std::vector<StepChunk> Scheduler::complete_step() {
  std::vector<StepChunk> step = std::move(in_flight_.front());
  in_flight_.pop_front();
  for (const StepChunk& e : step) {
    e.seq->in_flight = false;
    e.seq->num_computed += e.num_rows;
  }
  return step;
}

void Scheduler::update(const std::vector<StepChunk>& step) {
  for (const StepChunk& e : step)
    if (e.seq->finish_reason) alloc_.release(e.seq->blocks);
  // Move finished sequences out of the running list, keeping admission order.
  for (auto it = running_.begin(); it != running_.end();) {
    if ((*it)->finish_reason && !(*it)->in_flight) {
      finished_.push_back(std::move(*it));
      it = running_.erase(it);
    } else {
      ++it;
    }
  }
}

std::vector<std::unique_ptr<Sequence>> Scheduler::take_finished() {
  std::vector<std::unique_ptr<Sequence>> out;
  out.swap(finished_);
  return out;
}

}  // namespace tpbatch
