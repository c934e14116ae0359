#include "backend/cuda/nccl_communicator.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "reliability/watchdog.h"

namespace tpbatch {
namespace {

class Timed {  // adds one call's bytes and (host) time to a collective's counters
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

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::BF16: return ncclBfloat16;
    case DType::F16: return ncclFloat16;
    default: throw Error(std::string("NCCL allreduce: dtype ") + dtype_name(t) + " is not supported");
  }
}

}  // namespace

NcclCommunicator::NcclCommunicator(MPI_Comm comm, CudaBackend& backend) : backend_(backend) {
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  TPBATCH_CUDA_CHECK(cudaSetDevice(backend_.device()));
  ncclUniqueId id{};
  if (rank_ == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  {
    WatchedCall w("NCCL bootstrap (MPI_Bcast of the unique id)");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
  }
  {
    WatchedCall w("NCCL init");
    NCCL_CHECK(ncclCommInitRank(&nccl_, size_, id, rank_));
  }
  backend_.add_error_source(this);
}

NcclCommunicator::~NcclCommunicator() {
  // Pending collectives must finish before the communicator goes. The wait is the backend's
  // watched one, with this communicator still among its sources: a peer that died aborts the
  // communicators (this one included) instead of hanging here. A communicator whose peer failed
  // after its last wait is aborted rather than destroyed (ncclCommDestroy's finalisation may
  // wait for the peer). After any abort: no wait, no destroy (ncclCommAbort freed it). A
  // destructor throws nothing.
  if (!aborted_ && nccl_ && !backend_.aborted()) {
    try {
      backend_.wait_stream("NCCL communicator teardown");
      if (!poll_async_error().empty()) abort();
    } catch (const std::exception& e) {
      log_info("NCCL communicator (rank %d of %d) teardown: %s", rank_, size_, e.what());
    }
  }
  backend_.remove_error_source(this);
  if (aborted_ || !nccl_ || backend_.aborted()) return;
  ncclCommDestroy(nccl_);
}

std::string NcclCommunicator::source_name() const {
  return "NCCL communicator (rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ")";
}

std::string NcclCommunicator::poll_async_error() {
  if (aborted_ || !nccl_) return "";
  ncclResult_t async = ncclSuccess;
  const ncclResult_t r = ncclCommGetAsyncError(nccl_, &async);
  if (r != ncclSuccess) return std::string("ncclCommGetAsyncError failed: ") + ncclGetErrorString(r);
  if (async != ncclSuccess && async != ncclInProgress) {
    const char* last = ncclGetLastError(nccl_);
    return std::string(ncclGetErrorString(async)) + (last && *last ? std::string(": ") + last : std::string());
  }
  return "";
}

void NcclCommunicator::abort() noexcept {
  if (aborted_ || !nccl_) return;
  aborted_ = true;
  ncclCommAbort(nccl_);  // ends the communicator's kernels; frees it
  nccl_ = nullptr;
}

void NcclCommunicator::allreduce_sum(BufferView data, size_t count) {
  Timed t(stats_["allreduce"], count * dtype_size(data.dtype));
  if (size_ == 1 || count == 0) return;
  if (aborted_) throw Error("NCCL allreduce on an aborted communicator");
  NCCL_CHECK(ncclAllReduce(data.data, data.data, count, nccl_type(data.dtype), ncclSum, nccl_, backend_.stream()));
}

void NcclCommunicator::allgather(BufferView send, BufferView recv, size_t bytes_per_rank) {
  Timed t(stats_["allgather"], bytes_per_rank * size_);
  if (bytes_per_rank == 0) return;
  if (aborted_) throw Error("NCCL allgather on an aborted communicator");
  NCCL_CHECK(ncclAllGather(send.data, recv.data, bytes_per_rank, ncclInt8, nccl_, backend_.stream()));
}

void NcclCommunicator::send(BufferView data, size_t bytes, int peer) {
  Timed t(stats_["send"], bytes);
  if (bytes == 0) return;
  if (aborted_) throw Error("NCCL send on an aborted communicator");
  NCCL_CHECK(ncclGroupStart());
  const ncclResult_t r = ncclSend(data.data, bytes, ncclInt8, peer, nccl_, backend_.stream());
  NCCL_CHECK(ncclGroupEnd());
  nccl_check(r, "ncclSend");
}

void NcclCommunicator::recv(BufferView data, size_t bytes, int peer) {
  Timed t(stats_["recv"], bytes);
  if (bytes == 0) return;
  if (aborted_) throw Error("NCCL recv on an aborted communicator");
  NCCL_CHECK(ncclGroupStart());
  const ncclResult_t r = ncclRecv(data.data, bytes, ncclInt8, peer, nccl_, backend_.stream());
  NCCL_CHECK(ncclGroupEnd());
  nccl_check(r, "ncclRecv");
}

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, Backend& cuda_backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&cuda_backend);
  if (!cuda)
    throw Error("make_nccl_communicator: backend '" + cuda_backend.name() + "' is not the CUDA backend");
  return std::make_unique<NcclCommunicator>(comm, *cuda);
}

}  // namespace tpbatch
