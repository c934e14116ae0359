#include "backend/cuda/nccl_communicator.h"

#include <chrono>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "reliability/watchdog.h"

namespace tpbatch {
namespace {

class Timed {  // adds one call's bytes and time to a collective's counters (as in MpiCommunicator)
 public:
  Timed(CollectiveStats& s, size_t bytes) : s_(s), t0_(std::chrono::steady_clock::now()) {
    s_.calls++;
    s_.bytes += static_cast<int64_t>(bytes);
  }
  ~Timed() { s_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

 private:
  CollectiveStats& s_;
  std::chrono::steady_clock::time_point t0_;
};

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw Error(std::string("NCCL error in ") + what + ": " + ncclGetErrorString(r));
}
#define NCCL_CHECK(call) nccl_check((call), #call)

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, int device, cudaStream_t stream)
    : mpi_(comm), device_(device), stream_(stream) {
  MPI_Comm_rank(mpi_, &rank_);
  MPI_Comm_size(mpi_, &size_);
  TPBATCH_CUDA_CHECK(cudaSetDevice(device_));
  ncclUniqueId id{};
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, mpi_);
  {
    WatchedCall w("NCCL init");
    NCCL_CHECK(ncclCommInitRank(&nccl_, size_, id, rank_));
  }
}

NcclCommunicator::~NcclCommunicator() {
  cudaStreamSynchronize(stream_);
  if (nccl_) ncclCommDestroy(nccl_);
}

void NcclCommunicator::wait(const char* what) {
  WatchedCall w(what);
  TPBATCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::allreduce_sum(float* data, size_t count) {
  Timed t(stats_["allreduce"], count * sizeof(float));
  if (size_ == 1 || count == 0) return;
  NCCL_CHECK(ncclAllReduce(data, data, count, ncclFloat, ncclSum, nccl_, stream_));
  wait("NCCL allreduce");
}

void NcclCommunicator::allgather(const void* send, void* recv, size_t bytes_per_rank) {
  Timed t(stats_["allgather"], bytes_per_rank * size_);
  if (bytes_per_rank == 0) return;
  NCCL_CHECK(ncclAllGather(send, recv, bytes_per_rank, ncclChar, nccl_, stream_));
  wait("NCCL allgather");
}

void NcclCommunicator::broadcast(void* data, size_t bytes, int root) {
  Timed t(stats_["broadcast"], bytes);
  if (size_ == 1 || bytes == 0) return;
  NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclChar, root, nccl_, stream_));
  wait("NCCL broadcast");
}

void NcclCommunicator::send(const void* data, size_t bytes, int peer, int /*tag*/) {
  Timed t(stats_["send"], bytes);
  NCCL_CHECK(ncclSend(data, bytes, ncclChar, peer, nccl_, stream_));
  wait("NCCL send");
}

void NcclCommunicator::recv(void* data, size_t bytes, int peer, int /*tag*/) {
  Timed t(stats_["recv"], bytes);
  NCCL_CHECK(ncclRecv(data, bytes, ncclChar, peer, nccl_, stream_));
  wait("NCCL recv");
}

void NcclCommunicator::barrier() {
  WatchedCall w("NCCL barrier");
  Timed t(stats_["barrier"], 0);
  TPBATCH_CUDA_CHECK(cudaStreamSynchronize(stream_));
  MPI_Barrier(mpi_);
}

}  // namespace tpbatch
