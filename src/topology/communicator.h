#pragma once
// The collectives a replica needs, behind one interface: MPI for the CPU backend, NCCL for CUDA.
// Every call is counted (calls and bytes per collective) for the metrics and for the tests that
// check the Megatron schedule: exactly two allreduces per layer.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

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

  virtual void allreduce_sum(float* data, size_t count) = 0;                 // in place
  virtual void allgather(const void* send, void* recv, size_t bytes_per_rank) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void send(const void* data, size_t bytes, int peer, int tag) = 0;
  virtual void recv(void* data, size_t bytes, int peer, int tag) = 0;
  virtual void barrier() = 0;

  const std::map<std::string, CollectiveStats>& stats() const { return stats_; }
  void reset_stats() { stats_.clear(); }

 protected:
  std::map<std::string, CollectiveStats> stats_;
};

}  // namespace tpbatch
