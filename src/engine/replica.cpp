#include "engine/replica.h"

#include <chrono>

#include "common/error.h"
#include "engine/output_processor.h"
#include "engine/row_admitter.h"
#include "engine/scheduler.h"
#include "engine/step_pipe.h"
#include "io/input_row.h"
#include "model/rope_frequencies.h"
#include "reliability/shutdown.h"

namespace tpbatch {
namespace {

using Clock = std::chrono::steady_clock;

SchedulerLimits scheduler_limits(const JobSpec& job, const ModelConfig& cfg, int stages) {
  return SchedulerLimits{job.engine.max_seqs, job.engine.max_batch_tokens, stages,
                         job.engine.admission == AdmissionPolicy::kLongestFirst,
                         /*backend_draws=*/true, rope_long_factors_after(cfg)};
}

// The scheduler's counts into the replica's figures; every KV block must be back unless the job
// was stopped with rows in flight.
void count_scheduler(const Scheduler& scheduler, const KvBlockAllocator& allocator, ReplicaStats& stats) {
  stats.preemptions = scheduler.preemptions();
  stats.prefix_cache_hit_tokens = scheduler.prefix_cache_hit_tokens();
  stats.long_rope_recomputed_tokens = scheduler.long_rope_recomputed_tokens();
  if (!stats.interrupted && allocator.free_blocks() != allocator.num_blocks())
    throw Error("internal error: " + std::to_string(allocator.num_blocks() - allocator.free_blocks()) +
                " KV blocks leaked after the job");
}

}  // namespace

ReplicaStats run_replica_leader(const JobSpec& job, const Tokenizer& tok, ModelRunner& runner, const Topology& topo,
                                Communicator& pp_data, WorkSource& source) {
  const ModelConfig& cfg = runner.shard().config;
  const int stages = topo.layout.pipeline;
  KvBlockAllocator allocator(runner.kv_layout().num_blocks, runner.kv_layout().block_size,
                             job.engine.prefix_caching);
  Scheduler scheduler(scheduler_limits(job, cfg, stages), allocator);
  RowAdmitter admitter(job, tok, cfg);
  admitter.set_kv_capacity_tokens(allocator.num_blocks() * allocator.block_size());
  runner.set_host_draw(draw_on_host);
  StepPipe pipe(topo, runner, pp_data);
  ReplicaStats stats;
  // Rows read ahead: at least max_seqs, but never more than the KV cache could run at once (one
  // block each), so a max_seqs meant as "no limit" does not read the whole input into memory.
  const size_t lookahead = static_cast<size_t>(
      std::max<int64_t>(job.engine.lookahead, std::min<int64_t>(job.engine.max_seqs, allocator.num_blocks())));
  bool more_input = true;
  std::vector<WorkItem> items;
  std::vector<RowResult> immediate;
  std::vector<std::unique_ptr<Sequence>> admitted;
  OutputProcessor output;
  StepResults out;
  const auto start = Clock::now();
  double busy = 0.0;

  auto emit_finished = [&] {
    for (auto& r : immediate) source.submit(r);
    immediate.clear();
    for (auto& s : scheduler.take_finished()) source.submit(to_result(*s, job.output.logprobs));
  };

  for (;;) {
    emit_finished();  // before asking for more: rows still held count against this replica's share
    if (more_input && scheduler.num_waiting() < lookahead) {
      items.clear();
      const bool wait = scheduler.idle() && scheduler.steps_in_flight() == 0;
      more_input = source.take(items, lookahead - scheduler.num_waiting(), wait);
      for (const WorkItem& item : items) {
        admitter.admit(item, admitted, immediate);
        for (auto& seq : admitted) scheduler.add(std::move(seq));
        admitted.clear();
      }
    }
    emit_finished();
    source.poll();
    // Keep up to one step per stage in flight, so every stage has work (micro-batching).
    bool launched = false;
    while (!stop_requested() && scheduler.steps_in_flight() < static_cast<size_t>(stages)) {
      StepInputs step = scheduler.schedule();
      if (step.rows() == 0) break;
      const auto t0 = Clock::now();
      pipe.launch(step);
      busy += std::chrono::duration<double>(Clock::now() - t0).count();
      ++stats.steps;
      launched = true;
    }
    if (scheduler.steps_in_flight() > 0) {
      pipe.collect(out);
      const std::vector<StepChunk> done = scheduler.complete_step();
      output.process(done, out, cfg.vocab_size, cfg.hidden_size);
      scheduler.update(done);
      continue;
    }
    if (!launched && scheduler.idle() && !more_input) break;
    if (stop_requested()) {  // SIGTERM: finished rows are kept; rows in flight are redone on resume
      stats.interrupted = true;
      break;
    }
  }
  emit_finished();
  pipe.stop();
  source.close();
  stats.step_seconds = busy;
  stats.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  count_scheduler(scheduler, allocator, stats);
  return stats;
}

ReplicaStats run_replica_worker(ModelRunner& runner, const Topology& topo, Communicator& pp_data) {
  runner.set_host_draw(draw_on_host);
  StepPipe pipe(topo, runner, pp_data);
  StepInputs step;
  ReplicaStats stats;
  const auto start = Clock::now();
  double busy = 0.0;
  while (pipe.receive(step)) {
    const auto t0 = Clock::now();
    pipe.run(step);
    busy += std::chrono::duration<double>(Clock::now() - t0).count();
    ++stats.steps;
  }
  stats.step_seconds = busy;
  stats.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace tpbatch
