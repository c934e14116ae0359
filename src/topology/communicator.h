#pragma once
// The data plane: tensor collectives of a TP group and a pipeline on backend buffers — MPI on the
// CPU backend (through Backend::host_access), NCCL on the backend's stream on CUDA. Control
// traffic (steps, rows, stop) never goes through here: it is host memory over MPI.
// Every call is counted (calls and bytes per collective) for the metrics and for the tests that
// check the Megatron schedule: exactly two allreduces per layer.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "backend/buffer.h"

namespace tpbatch {

struct CollectiveStats {
  int64_t calls = 0;
  int64_t bytes = 0;
  double seconds = 0.0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place, `count` elements of the view's dtype (F32 or BF16).
  virtual void allreduce_sum(BufferView data, size_t count) = 0;
  // recv = the ranks' send blocks in rank order.
  virtual void allgather(BufferView send, BufferView recv, size_t bytes_per_rank) = 0;
  // Point to point within the group; messages between a pair of ranks match in call order. A send
  // may return before the peer received (the data is copied or stream-ordered).
  virtual void send(BufferView data, size_t bytes, int peer) = 0;
  virtual void recv(BufferView data, size_t bytes, int peer) = 0;

  const std::map<std::string, CollectiveStats>& stats() const { return stats_; }
  void reset_stats() { stats_.clear(); }

 protected:
  std::map<std::string, CollectiveStats> stats_;
};

}  // namespace tpbatch
