#pragma once
// One data-parallel replica's engine loop. Its leader (tp 0) reads rows, tokenizes them, runs the
// scheduler and broadcasts each step to the replica's other ranks, so ranks can never diverge;
// every rank then runs the step on its shard.
#include "engine/work_source.h"
#include "job/job_spec.h"
#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"
#include "topology/communicator.h"

namespace tpbatch {

struct ReplicaStats {
  int64_t steps = 0;
  int64_t preemptions = 0;
  double step_seconds = 0.0;
};

ReplicaStats run_replica_leader(const JobSpec& job, const Tokenizer& tokenizer, ModelRunner& runner,
                                Communicator& replica, WorkSource& source);
void run_replica_worker(ModelRunner& runner, Communicator& replica);

}  // namespace tpbatch
