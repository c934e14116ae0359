#pragma once
// Communicator over NCCL, for the CUDA backend: data pointers are device pointers.
// Bootstrapped over MPI as FasterTransformer does: the group's first rank calls ncclGetUniqueId,
// MPI_Bcast sends the id over the group's MPI communicator, every rank calls ncclCommInitRank.
// Each call is enqueued on the communicator's stream and waited for, so calls block like
// MpiCommunicator's; calls and bytes are counted under the same names.
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include "topology/communicator.h"

namespace tpbatch {

class NcclCommunicator final : public Communicator {
 public:
  // Collective over `comm` (not owned: it must outlive this). Sets `device` current. Collectives
  // run on `stream` (not owned); the default, the legacy default stream, is ordered after and
  // before all work on the backend's (blocking) stream, so no extra synchronisation is needed.
  NcclCommunicator(MPI_Comm comm, int device, cudaStream_t stream = nullptr);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  ncclComm_t nccl() const { return nccl_; }
  cudaStream_t stream() const { return stream_; }

  void allreduce_sum(float* data, size_t count) override;
  void allgather(const void* send, void* recv, size_t bytes_per_rank) override;
  void broadcast(void* data, size_t bytes, int root) override;
  // NCCL point-to-point has no tags: messages between a pair of ranks match in call order.
  void send(const void* data, size_t bytes, int peer, int tag) override;
  void recv(void* data, size_t bytes, int peer, int tag) override;
  void barrier() override;

 private:
  void wait(const char* what);
  MPI_Comm mpi_;
  int device_;
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t nccl_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace tpbatch
