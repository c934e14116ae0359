#pragma once
// The data plane on CUDA: Communicator over NCCL on the CUDA backend's stream. Data are device
// buffers. Bootstrapped over MPI as FasterTransformer does: the group's first rank calls
// ncclGetUniqueId, MPI_Bcast sends the id over the group's MPI communicator, every rank calls
// ncclCommInitRank. Calls are enqueued on the backend's stream behind the kernels that produce
// their data and return without waiting, so they are timed on the stream (a CUDA event before and
// after each, read once passed): the stats' seconds are the collectives' own, not the enqueue's.
// The backend's host waits poll this communicator's asynchronous error and abort it when the
// peer has failed.
// Make it with make_nccl_communicator() (cuda_backend.h).
#include <mpi.h>
#include <nccl.h>

#include <deque>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/nccl_watch.h"
#include "comm/communicator.h"

namespace tpbatch {

class NcclCommunicator final : public Communicator, public AsyncErrorSource {
 public:
  // Collective over `comm` (not owned: it must outlive this), as must `backend`.
  NcclCommunicator(MPI_Comm comm, CudaBackend& backend);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  // AsyncErrorSource
  std::string source_name() const override;
  std::string poll_async_error() override;
  void abort() noexcept override;

 private:
  void run_allreduce_sum(BufferView data, size_t count) override;  // F32, BF16 or F16
  void run_allreduce_max(BufferView data, size_t count) override;
  void run_allgather(BufferView send, BufferView recv, size_t bytes_per_rank) override;
  // One ncclSend / ncclRecv each, in its own NCCL group; messages between a pair of ranks match
  // in call order. A send is complete (on the stream) only when the peer's recv has been posted,
  // so two ranks that both send before receiving deadlock on the device.
  void run_send(BufferView data, size_t bytes, int peer) override;
  void run_recv(BufferView data, size_t bytes, int peer) override;

  void start_timing() override;
  void stop_timing(const std::string& op) override;
  void settle_timings() override;
  void read_passed_timings();  // those whose end event the stream has passed: no wait
  cudaEvent_t spare_event();

  struct Timing {
    std::string op;
    cudaEvent_t start, end;
  };
  std::deque<Timing> timings_;             // recorded on the stream, not read yet
  std::vector<cudaEvent_t> spare_events_;  // read ones, for reuse
  cudaEvent_t started_ = nullptr;          // the current call's start
  CudaBackend& backend_;
  int rank_ = 0;
  int size_ = 1;
  ncclComm_t nccl_ = nullptr;
  bool aborted_ = false;
};

}  // namespace tpbatch
