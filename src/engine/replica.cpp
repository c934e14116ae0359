#include "engine/replica.h"

#include <chrono>
#include <numeric>

#include "common/error.h"
#include "engine/scheduler.h"
#include "io/input_row.h"

namespace tpbatch {
namespace {

enum Command : int64_t { kStop = 0, kStep = 1 };

using Clock = std::chrono::steady_clock;

RowResult error_row(int64_t index, const std::string& id, const std::string& why) {
  RowResult r;
  r.index = index;
  r.id = id;
  r.finish_reason = "error";
  r.error = why;
  return r;
}

RowResult to_result(const Sequence& s, bool logprobs) {
  RowResult r;
  r.index = s.row;
  r.id = s.id;
  r.finish_reason = s.finish_reason;
  r.error = s.error;
  const int64_t out_from = s.scoring ? s.score_from : s.prompt_len;
  const int64_t prompt_end = s.scoring ? s.prompt_len : s.prompt_len;
  r.prompt_tokens.assign(s.tokens.begin(), s.tokens.begin() + prompt_end);
  if (s.finish_reason == "error") return r;
  r.output_tokens.assign(s.tokens.begin() + out_from, s.tokens.end());
  r.output_text = s.text;
  if (logprobs || s.scoring) r.output_logprobs = s.logprobs;
  r.logprob_sum = std::accumulate(s.logprobs.begin(), s.logprobs.end(), 0.0);
  r.is_greedy = s.all_greedy ? 1 : 0;
  if (!s.scoring && s.num_generated() > 0) {
    r.ttft_seconds = std::chrono::duration<double>(s.first_token - s.arrived).count();
    if (s.num_generated() > 1)
      r.tpot_seconds = std::chrono::duration<double>(s.finished - s.first_token).count() / (s.num_generated() - 1);
  }
  return r;
}

// Turns an input line into a sequence, or an error row. Bad lines end the job under on_bad_line: fail.
class RowAdmitter {
 public:
  RowAdmitter(const JobSpec& job, const Tokenizer& tok, const ModelConfig& cfg) : job_(job), tok_(tok), cfg_(cfg) {}

  std::unique_ptr<Sequence> admit(const WorkItem& item, std::vector<RowResult>& immediate) {
    InputRow row;
    try {
      row = parse_input_row(item.line, item.index, job_, tok_.vocab_size());
    } catch (const BadLine& bad) {
      if (job_.input.on_bad_line == "fail")
        throw Error(bad.reason + " (input.on_bad_line: fail)", kExitBadInput);
      immediate.push_back(error_row(item.index, bad.id, bad.reason));
      return nullptr;
    }
    auto s = std::make_unique<Sequence>();
    s->row = row.index;
    s->id = row.id;
    s->sampling = row.sampling;
    s->eos_ids = cfg_.eos_token_ids;
    s->arrived = Clock::now();
    s->tokens = row.tokens ? *row.tokens : tok_.encode(*row.text, true);
    s->prompt_len = static_cast<int64_t>(s->tokens.size());
    const int64_t max_pos = cfg_.max_position_embeddings;
    const std::string line = "input line " + std::to_string(item.index + 1) + ": ";
    if (job_.task == "score") {
      s->scoring = true;
      if (row.completion) {
        const std::vector<int32_t> c = tok_.encode(*row.completion, false);
        s->tokens.insert(s->tokens.end(), c.begin(), c.end());
        s->score_from = s->prompt_len;
      } else {
        s->score_from = 1;  // perplexity of the prompt itself
      }
      if (static_cast<int64_t>(s->tokens.size()) > max_pos) {
        immediate.push_back(error_row(row.index, row.id, line + "prompt and completion have " +
                                      std::to_string(s->tokens.size()) + " tokens; the model's context is " +
                                      std::to_string(max_pos)));
        return nullptr;
      }
      if (s->score_from >= static_cast<int64_t>(s->tokens.size()) || s->tokens.empty()) {
        s->finish_reason = "scored";  // nothing to score
        immediate.push_back(to_result(*s, true));
        return nullptr;
      }
      return s;
    }
    if (s->prompt_len == 0) {
      immediate.push_back(error_row(row.index, row.id, line + "the prompt has no tokens"));
      return nullptr;
    }
    if (s->prompt_len >= max_pos) {
      immediate.push_back(error_row(row.index, row.id, line + "prompt has " + std::to_string(s->prompt_len) +
                                    " tokens; the model's context is " + std::to_string(max_pos)));
      return nullptr;
    }
    s->max_len = std::min<int64_t>(s->prompt_len + row.sampling.max_new_tokens, max_pos);
    s->detokenizer = std::make_unique<IncrementalDetokenizer>(tok_, s->tokens);
    if (s->max_len <= s->prompt_len) {
      s->finish_reason = "length";
      immediate.push_back(to_result(*s, job_.output.logprobs));
      return nullptr;
    }
    return s;
  }

 private:
  const JobSpec& job_;
  const Tokenizer& tok_;
  const ModelConfig& cfg_;
};

void broadcast_step(Communicator& replica, const StepInputs* step) {
  if (replica.size() == 1) return;
  std::string bytes = step ? step->serialize() : std::string();
  int64_t header[2] = {step ? kStep : kStop, static_cast<int64_t>(bytes.size())};
  replica.broadcast(header, sizeof header, 0);
  if (step) replica.broadcast(bytes.data(), bytes.size(), 0);
}

}  // namespace

ReplicaStats run_replica_leader(const JobSpec& job, const Tokenizer& tok, ModelRunner& runner, Communicator& replica,
                                WorkSource& source) {
  const ModelConfig& cfg = runner.shard().config;
  KvBlockAllocator allocator(runner.kv_layout().num_blocks, runner.kv_layout().block_size);
  Scheduler scheduler(SchedulerLimits{job.engine.max_seqs, job.engine.max_batch_tokens}, allocator);
  RowAdmitter admitter(job, tok, cfg);
  ReplicaStats stats;
  const size_t lookahead = static_cast<size_t>(std::max<int64_t>(job.engine.lookahead, job.engine.max_seqs));
  bool more_input = true;
  std::vector<WorkItem> items;
  std::vector<RowResult> immediate;
  std::vector<LogitResult> results;
  std::vector<float> full_logits;

  auto emit_finished = [&] {
    for (auto& r : immediate) source.submit(r);
    immediate.clear();
    for (auto& s : scheduler.take_finished()) source.submit(to_result(*s, job.output.logprobs));
  };

  for (;;) {
    if (more_input && scheduler.num_waiting() < lookahead) {
      items.clear();
      more_input = source.take(items, lookahead - scheduler.num_waiting(), scheduler.idle());
      for (const WorkItem& item : items)
        if (auto seq = admitter.admit(item, immediate)) scheduler.add(std::move(seq));
    }
    emit_finished();
    source.poll();
    if (scheduler.idle()) {
      if (!more_input) break;
      continue;
    }
    StepInputs step = scheduler.schedule();
    if (step.rows() == 0) continue;
    const auto t0 = Clock::now();
    broadcast_step(replica, &step);
    runner.step(step, results, full_logits);
    scheduler.apply(results, full_logits, cfg.vocab_size);
    stats.step_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    ++stats.steps;
  }
  emit_finished();
  broadcast_step(replica, nullptr);
  source.close();
  stats.preemptions = scheduler.preemptions();
  if (allocator.free_blocks() != allocator.num_blocks())
    throw Error("internal error: " + std::to_string(allocator.num_blocks() - allocator.free_blocks()) +
                " KV blocks leaked after the job");
  return stats;
}

void run_replica_worker(ModelRunner& runner, Communicator& replica) {
  std::vector<LogitResult> results;
  std::vector<float> full_logits;
  std::string bytes;
  for (;;) {
    int64_t header[2] = {0, 0};
    replica.broadcast(header, sizeof header, 0);
    if (header[0] == kStop) return;
    bytes.resize(static_cast<size_t>(header[1]));
    replica.broadcast(bytes.data(), bytes.size(), 0);
    runner.step(StepInputs::deserialize(bytes), results, full_logits);
  }
}

}  // namespace tpbatch
