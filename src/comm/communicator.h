#pragma once
// The data plane: tensor collectives of a TP group and a pipeline on backend buffers — MPI on the
// CPU backend (through Backend::host_access), NCCL on the backend's stream on CUDA. Control
// traffic (steps, rows, stop) never goes through here: it takes a ControlChannel (host memory).
// Every call is counted here, once for every implementation (calls, bytes and seconds per
// operation), for the metrics and for the tests that check the Megatron schedule: exactly two
// allreduces per layer.
#include <chrono>
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
  void allreduce_sum(BufferView data, size_t count);
  // In place, `count` F32 elements: each the largest of the ranks' (an exact result, the same on
  // every rank whatever the order the ranks combine in).
  void allreduce_max(BufferView data, size_t count);
  // recv = the ranks' send blocks in rank order.
  void allgather(BufferView send, BufferView recv, size_t bytes_per_rank);
  // Point to point within the group; messages between a pair of ranks match in call order. A send
  // may return before the peer received (the data is copied or stream-ordered).
  void send(BufferView data, size_t bytes, int peer);
  void recv(BufferView data, size_t bytes, int peer);

  // Per operation ("allreduce", "allreduce max", "allgather", "send", "recv"). The seconds are the operations'
  // own: timings still running on a device are waited for first.
  const std::map<std::string, CollectiveStats>& stats();
  void reset_stats();

 protected:
  virtual void run_allreduce_sum(BufferView data, size_t count) = 0;
  virtual void run_allreduce_max(BufferView data, size_t count) = 0;
  virtual void run_allgather(BufferView send, BufferView recv, size_t bytes_per_rank) = 0;
  virtual void run_send(BufferView data, size_t bytes, int peer) = 0;
  virtual void run_recv(BufferView data, size_t bytes, int peer) = 0;

  // How one call is timed. The default reads the host clock around it: the operation's time when
  // the call returns only once it is done (MPI). A communicator whose calls merely enqueue work on
  // a device overrides the three to time that work on the device, and adds the seconds it learns
  // later through add_seconds.
  virtual void start_timing();
  virtual void stop_timing(const std::string& op);
  virtual void settle_timings() {}  // adds every pending timing (may wait for the device)
  void add_seconds(const std::string& op, double seconds) { stats_[op].seconds += seconds; }

 private:
  template <class Call>
  void counted(const char* op, size_t bytes, Call call);

  std::map<std::string, CollectiveStats> stats_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace tpbatch
