#pragma once
// One data-parallel replica's engine loop. Its leader reads rows, tokenizes them, runs the
// scheduler and sends each step to the replica's other ranks, so ranks can never diverge; every
// rank then runs the step on its shard (its TP slice of its pipeline stage's layers).
#include "engine/work_source.h"
#include "job/job_spec.h"
#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"
#include "topology/topology.h"

namespace tpbatch {

struct ReplicaStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  int64_t prefix_cache_hit_tokens = 0;  // tokens whose K/V came from the prefix cache (re-admissions too)
  int64_t long_rope_recomputed_tokens = 0;  // cached tokens computed again with longrope's long factors
  double step_seconds = 0.0;   // busy computing (and sending) this rank's part of steps
  double wall_seconds = 0.0;
  bool interrupted = false;    // stopped early by SIGTERM/SIGINT
  double busy_fraction() const { return wall_seconds > 0 ? step_seconds / wall_seconds : 0.0; }
};

// The leader is stage 0's TP rank 0. Under pipeline parallelism it keeps one step per stage in flight.
// pp_data: the data plane between this rank and its neighbours in the pipeline (hidden states).
ReplicaStats run_replica_leader(const JobSpec& job, const Tokenizer& tokenizer, ModelRunner& runner,
                                const Topology& topo, Communicator& pp_data, WorkSource& source);
ReplicaStats run_replica_worker(ModelRunner& runner, const Topology& topo, Communicator& pp_data);

}  // namespace tpbatch
