#pragma once
// A TP group of one rank, for running one rank's work in a process of its own (benchmarks, tests):
// allreduces leave the data as it is, allgather copies the rank's block, and point to point,
// which a group of one never does, is an error.
#include <cstddef>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace tpbatch {

class OneRankCommunicator : public Communicator {
 public:
  explicit OneRankCommunicator(Backend& be) : be_(be) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }

 private:
  void run_allreduce_sum(BufferView, size_t) override {}
  void run_allreduce_max(BufferView, size_t) override {}
  void run_allgather(BufferView send, BufferView recv, size_t bytes_per_rank) override;
  void run_send(BufferView, size_t, int peer) override;
  void run_recv(BufferView, size_t, int peer) override;

  Backend& be_;
};

}  // namespace tpbatch
