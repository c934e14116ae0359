#pragma once
// The data plane over MPI: tensor collectives on backend buffers, reached through
// Backend::host_access (the buffer itself on the CPU backend; a staged copy on CUDA, where it is
// the fallback when NCCL is not wanted). Sends are non-blocking: the data is copied out and the
// send completes in the background, so a pipeline stage never waits for the next one to listen.
#include <mpi.h>

#include <string>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "comm/control_channel.h"

namespace tpbatch {

class MpiTensorCommunicator final : public Communicator {
 public:
  // Over `comm` (not owned: it must outlive this).
  MpiTensorCommunicator(MPI_Comm comm, Backend& backend);
  MpiTensorCommunicator(const MpiTensorCommunicator&) = delete;
  MpiTensorCommunicator& operator=(const MpiTensorCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

 private:
  void run_allreduce_sum(BufferView data, size_t count) override;
  void run_allreduce_max(BufferView data, size_t count) override;
  void run_allgather(BufferView send, BufferView recv, size_t bytes_per_rank) override;
  void run_send(BufferView data, size_t bytes, int peer) override;
  void run_recv(BufferView data, size_t bytes, int peer) override;

  static constexpr int kTag = 301;  // distinct from the control messages' tags

  MPI_Comm comm_;
  Backend& be_;
  int rank_ = 0;
  int size_ = 1;
  ControlChannel sends_;  // owns each send's copy until MPI is done with it (drained on destruction)
};

}  // namespace tpbatch
