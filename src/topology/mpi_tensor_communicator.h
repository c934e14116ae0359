#pragma once
// The data plane over MPI: tensor collectives on backend buffers, reached through
// Backend::host_access (the buffer itself on the CPU backend; a staged copy on CUDA, where it is
// the fallback when NCCL is not wanted). Sends are non-blocking: the data is copied out and the
// send completes in the background, so a pipeline stage never waits for the next one to listen.
#include <mpi.h>

#include <deque>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "topology/communicator.h"

namespace tpbatch {

class MpiTensorCommunicator final : public Communicator {
 public:
  // Over `comm` (not owned: it must outlive this).
  MpiTensorCommunicator(MPI_Comm comm, Backend& backend);
  ~MpiTensorCommunicator() override;
  MpiTensorCommunicator(const MpiTensorCommunicator&) = delete;
  MpiTensorCommunicator& operator=(const MpiTensorCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void allreduce_sum(BufferView data, size_t count) override;
  void allgather(BufferView send, BufferView recv, size_t bytes_per_rank) override;
  void send(BufferView data, size_t bytes, int peer) override;
  void recv(BufferView data, size_t bytes, int peer) override;

 private:
  static constexpr int kTag = 301;  // distinct from the control channel's tags
  void complete_sends(size_t keep);

  MPI_Comm comm_;
  Backend& be_;
  int rank_ = 0;
  int size_ = 1;
  struct Pending {
    std::vector<char> bytes;
    MPI_Request request;
  };
  std::deque<Pending> sends_;
};

}  // namespace tpbatch
