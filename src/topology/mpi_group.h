#pragma once
// One MPI communicator's ranks, on host memory: the control plane (steps, rows, results, stop)
// and start-up agreement. Tensors go through a data-plane Communicator instead
// (MpiTensorCommunicator on the CPU backend, NCCL on CUDA). Calls are counted like a Communicator's.
#include <mpi.h>

#include <map>
#include <string>

#include "topology/communicator.h"

namespace tpbatch {

// Owned: the MPI communicator is freed on destruction unless it is MPI_COMM_WORLD.
class MpiGroup {
 public:
  explicit MpiGroup(MPI_Comm comm, bool owned = true);
  ~MpiGroup();
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }

  void allreduce_sum(float* data, size_t count);  // in place
  void allgather(const void* send, void* recv, size_t bytes_per_rank);
  void broadcast(void* data, size_t bytes, int root);
  void send(const void* data, size_t bytes, int peer, int tag);
  void recv(void* data, size_t bytes, int peer, int tag);
  void barrier();

  const std::map<std::string, CollectiveStats>& stats() const { return stats_; }

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
  std::map<std::string, CollectiveStats> stats_;
};

// n as an MPI count; throws Error when it does not fit in an int.
int mpi_count(size_t n);

// Counts one call's bytes and time into a collective's counters (shared by the communicators).
class TimedCall {
 public:
  TimedCall(CollectiveStats& s, size_t bytes);
  ~TimedCall();

 private:
  CollectiveStats& s_;
  double t0_;
};

}  // namespace tpbatch
