#pragma once
// How a step travels through one replica's ranks, pipeline parallel or not: the leader (stage 0's
// TP rank 0) launches it, every rank runs it on its shard, and the last stage's output comes back
// to the leader -- one path whatever the number of stages.
//
// No replica-wide collective is involved, so pipeline stages overlap: the leader broadcasts the
// step inside stage 0's TP group, and each stage's rank t passes it, with the hidden state, to
// rank t of the next stage (the step on the control plane, the hidden state on the data plane).
// The last stage's TP rank 0 returns the logits (and the embed task's pooled hidden states); on a
// single stage that rank is the leader itself, which keeps them.
#include <deque>
#include <vector>

#include "comm/communicator.h"
#include "comm/control_channel.h"
#include "engine/step_chunk.h"
#include "model/model_runner.h"
#include "topology/topology.h"

namespace tpbatch {

class StepPipe {
 public:
  // pp_data: the data plane between this rank and its pipeline neighbours (hidden states).
  StepPipe(const Topology& topo, ModelRunner& runner, Communicator& pp_data);

  // The leader: sends `step` to the replica's ranks and runs it on its own stage.
  void launch(const StepInputs& step);
  // The leader: the output of the oldest launched step not yet collected (waits for it).
  void collect(StepResults& out);
  // The leader: every rank of the replica stops after the steps already launched.
  void stop();

  // Every other rank: the next step, false at the stop (handed on down the pipeline).
  bool receive(StepInputs& step);
  // Every rank: runs the step on this rank's stage and hands it on (next stage, or the output).
  void run(const StepInputs& step);

 private:
  bool is_leader() const { return topo_.is_replica_leader(); }
  bool last_stage() const { return topo_.coords.pp == topo_.layout.pipeline - 1; }
  void send_next(const StepInputs* step);  // nullptr: the stop
  void send_output(const StepResults& out);
  void drain_bounded();

  const Topology& topo_;
  ModelRunner& runner_;
  Communicator& data_;
  ControlChannel tp_;         // stage 0's TP group: the leader's broadcast
  ControlChannel pp_;         // this rank's pipeline: steps down, output back to the leader
  StepResults output_;         // the last stage's, before it goes to the leader
  std::deque<StepResults> kept_;  // the leader's own output, on a single stage
};

}  // namespace tpbatch
