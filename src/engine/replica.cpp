#include "engine/replica.h"

#include <mpi.h>

#include <chrono>
#include <cstring>
#include <deque>
#include <numeric>

#include "common/error.h"
#include "engine/row_admitter.h"
#include "engine/scheduler.h"
#include "io/input_row.h"
#include "reliability/shutdown.h"
#include "reliability/watchdog.h"
#include "topology/topology.h"

namespace tpbatch {
namespace {

enum Command : int64_t { kStop = 0, kStep = 1 };

using Clock = std::chrono::steady_clock;

// A step travels to the replica's ranks without any replica-wide collective, so pipeline stages
// overlap: the leader broadcasts it inside stage 0's TP group, and each stage's rank t passes it,
// with the hidden state, to rank t of the next stage (the step on the MPI control plane, the hidden
// state on the data plane). The last stage's TP rank 0 returns the logits.
class StepPipe {
 public:
  StepPipe(const Topology& topo, ModelRunner& runner, Communicator& pp_data)
      : topo_(topo), runner_(runner), data_(pp_data) {}
  ~StepPipe() { complete_sends(0); }

  int stages() const { return topo_.layout.pipeline; }
  int stage() const { return topo_.coords.pp; }
  bool last_stage() const { return stage() == stages() - 1; }

  // Stage 0: the leader's step reaches its TP peers (step == nullptr on the leader = stop).
  bool tp_broadcast(StepInputs* step, StepInputs& received) {
    MpiGroup& tp = *topo_.tp;
    if (tp.size() == 1) return step != nullptr;
    int64_t header[2] = {step ? kStep : kStop, 0};
    std::string bytes;
    if (tp.rank() == 0 && step) {
      bytes = step->serialize();
      header[1] = static_cast<int64_t>(bytes.size());
    }
    tp.broadcast(header, sizeof header, 0);
    if (header[0] == kStop) return false;
    bytes.resize(static_cast<size_t>(header[1]));
    tp.broadcast(bytes.data(), bytes.size(), 0);
    if (tp.rank() != 0) received = StepInputs::deserialize(bytes);
    return true;
  }

  // Sends the step (control plane) and this stage's output hidden state (data plane: backend
  // memory, NCCL on CUDA) to the next stage; step == nullptr: a stop.
  void send_next(const StepInputs* step) {
    std::string bytes = step ? step->serialize() : std::string();
    const int64_t header[2] = {step ? kStep : kStop, static_cast<int64_t>(bytes.size())};
    complete_sends(2 * static_cast<size_t>(stages()));
    sends_.emplace_back();
    Pending& p = sends_.back();
    p.bytes.reserve(sizeof header + bytes.size());
    p.bytes.append(reinterpret_cast<const char*>(header), sizeof header);
    p.bytes.append(bytes);
    MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, stage() + 1, kStageTag, topo_.pp->comm(),
              &p.request);
    if (step && step->rows() > 0) data_.send(runner_.hidden(), runner_.hidden_bytes(step->rows()), stage() + 1);
  }

  // Receives the previous stage's message: the step, then the hidden state into the runner.
  bool recv_prev(StepInputs& step) {
    receive(stage() - 1, kStageTag);
    int64_t header[2];
    std::memcpy(header, buffer_.data(), sizeof header);
    if (header[0] == kStop) return false;
    step = StepInputs::deserialize(buffer_.substr(sizeof header, static_cast<size_t>(header[1])));
    if (step.rows() > 0) data_.recv(runner_.hidden_input(step.rows()), runner_.hidden_bytes(step.rows()), stage() - 1);
    return true;
  }

  // Last stage's TP rank 0 -> the leader (stage 0's TP rank 0): logits, and the embed task's
  // pooled hidden states.
  void send_results(const std::vector<LogitResult>& results, const std::vector<float>& full,
                    const std::vector<float>& embeds) {
    std::string m;
    const int64_t header[3] = {static_cast<int64_t>(results.size()), static_cast<int64_t>(full.size()),
                               static_cast<int64_t>(embeds.size())};
    m.append(reinterpret_cast<const char*>(header), sizeof header);
    m.append(reinterpret_cast<const char*>(results.data()), results.size() * sizeof(LogitResult));
    m.append(reinterpret_cast<const char*>(full.data()), full.size() * sizeof(float));
    m.append(reinterpret_cast<const char*>(embeds.data()), embeds.size() * sizeof(float));
    MPI_Send(m.data(), static_cast<int>(m.size()), MPI_BYTE, 0, kResultTag, topo_.pp->comm());
  }

  void recv_results(std::vector<LogitResult>& results, std::vector<float>& full, std::vector<float>& embeds) {
    receive(stages() - 1, kResultTag);
    int64_t header[3];
    std::memcpy(header, buffer_.data(), sizeof header);
    results.resize(static_cast<size_t>(header[0]));
    full.resize(static_cast<size_t>(header[1]));
    embeds.resize(static_cast<size_t>(header[2]));
    const char* at = buffer_.data() + sizeof header;
    std::memcpy(results.data(), at, results.size() * sizeof(LogitResult));
    at += results.size() * sizeof(LogitResult);
    std::memcpy(full.data(), at, full.size() * sizeof(float));
    at += full.size() * sizeof(float);
    std::memcpy(embeds.data(), at, embeds.size() * sizeof(float));
  }

  void complete_sends(size_t keep) {
    while (sends_.size() > keep) {
      MPI_Wait(&sends_.front().request, MPI_STATUS_IGNORE);
      sends_.pop_front();
    }
  }

 private:
  static constexpr int kStageTag = 201, kResultTag = 202;
  struct Pending {
    std::string bytes;
    MPI_Request request;
  };
  void receive(int source, int tag) {
    WatchedCall w(tag == kStageTag ? "pipeline receive from the previous stage" : "pipeline receive of logits");
    MPI_Status st;
    MPI_Probe(source, tag, topo_.pp->comm(), &st);
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    buffer_.resize(static_cast<size_t>(count));
    MPI_Recv(buffer_.data(), count, MPI_BYTE, source, tag, topo_.pp->comm(), MPI_STATUS_IGNORE);
  }

  const Topology& topo_;
  ModelRunner& runner_;
  Communicator& data_;
  std::deque<Pending> sends_;  // buffers stay alive until their send completes
  std::string buffer_;
};

}  // namespace

ReplicaStats run_replica_leader(const JobSpec& job, const Tokenizer& tok, ModelRunner& runner, const Topology& topo,
                                Communicator& pp_data, WorkSource& source) {
  const ModelConfig& cfg = runner.shard().config;
  const int stages = topo.layout.pipeline;
  KvBlockAllocator allocator(runner.kv_layout().num_blocks, runner.kv_layout().block_size,
                             job.engine.prefix_caching);
  Scheduler scheduler(SchedulerLimits{job.engine.max_seqs, job.engine.max_batch_tokens, stages,
                                      job.engine.admission == AdmissionPolicy::kLongestFirst,
                                      /*backend_draws=*/true, rope_long_factors_after(cfg)},
                      allocator);
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
  std::vector<LogitResult> results;
  std::vector<float> full_logits;
  std::vector<float> embeds;  // task: embed: the step's pooled hidden-state sums
  const int64_t hidden = cfg.hidden_size;
  StepInputs unused;
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
      pipe.tp_broadcast(&step, unused);
      if (stages == 1) {
        runner.step(step, results, full_logits);
        runner.compute_embeddings(step, embeds);
        scheduler.apply(results, full_logits, cfg.vocab_size, embeds, hidden);
      } else {
        runner.run_stage(step);
        pipe.send_next(&step);
      }
      busy += std::chrono::duration<double>(Clock::now() - t0).count();
      ++stats.steps;
      launched = true;
    }
    if (scheduler.steps_in_flight() > 0) {
      pipe.recv_results(results, full_logits, embeds);
      scheduler.apply(results, full_logits, cfg.vocab_size, embeds, hidden);
      continue;
    }
    if (!launched && scheduler.idle() && !more_input) break;
    if (stop_requested()) {  // SIGTERM: finished rows are kept; rows in flight are redone on resume
      stats.interrupted = true;
      break;
    }
  }
  emit_finished();
  pipe.tp_broadcast(nullptr, unused);
  if (stages > 1) pipe.send_next(nullptr);
  pipe.complete_sends(0);
  source.close();
  stats.preemptions = scheduler.preemptions();
  stats.prefix_cache_hit_tokens = scheduler.prefix_cache_hit_tokens();
  stats.long_rope_recomputed_tokens = scheduler.long_rope_recomputed_tokens();
  stats.step_seconds = busy;
  stats.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!stats.interrupted && allocator.free_blocks() != allocator.num_blocks())
    throw Error("internal error: " + std::to_string(allocator.num_blocks() - allocator.free_blocks()) +
                " KV blocks leaked after the job");
  return stats;
}

ReplicaStats run_replica_worker(ModelRunner& runner, const Topology& topo, Communicator& pp_data) {
  runner.set_host_draw(draw_on_host);
  StepPipe pipe(topo, runner, pp_data);
  std::vector<LogitResult> results;
  std::vector<float> full_logits;
  std::vector<float> embeds;
  StepInputs step;
  ReplicaStats stats;
  const auto start = Clock::now();
  double busy = 0.0;
  for (;;) {
    const bool go = pipe.stage() == 0 ? pipe.tp_broadcast(nullptr, step) : pipe.recv_prev(step);
    if (!go) {
      if (!pipe.last_stage()) pipe.send_next(nullptr);
      break;
    }
    const auto t0 = Clock::now();
    runner.run_stage(step);
    if (!pipe.last_stage()) {
      pipe.send_next(&step);
    } else {
      runner.compute_logits(step, results, full_logits);
      if (topo.coords.tp == 0) {  // the hidden state is replicated: one rank's embeddings suffice
        runner.compute_embeddings(step, embeds);
        pipe.send_results(results, full_logits, embeds);
      }
    }
    busy += std::chrono::duration<double>(Clock::now() - t0).count();
    ++stats.steps;
  }
  pipe.complete_sends(0);
  stats.step_seconds = busy;
  stats.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return stats;
}

}  // namespace tpbatch
