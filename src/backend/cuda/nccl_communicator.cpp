#include "backend/cuda/nccl_communicator.h"

#include <cstdio>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "reliability/watchdog.h"

namespace tpbatch {
namespace {

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
  for (const Timing& t : timings_) spare_events_.insert(spare_events_.end(), {t.start, t.end});
  if (started_) spare_events_.push_back(started_);
  for (cudaEvent_t e : spare_events_) cudaEventDestroy(e);
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

void NcclCommunicator::run_allreduce_sum(BufferView data, size_t count) {
  if (size_ == 1 || count == 0) return;
  if (aborted_) throw Error("NCCL allreduce on an aborted communicator");
  NCCL_CHECK(ncclAllReduce(data.data, data.data, count, nccl_type(data.dtype), ncclSum, nccl_, backend_.stream()));
}

void NcclCommunicator::run_allreduce_max(BufferView data, size_t count) {
  if (size_ == 1 || count == 0) return;
  if (aborted_) throw Error("NCCL allreduce max on an aborted communicator");
  NCCL_CHECK(ncclAllReduce(data.data, data.data, count, ncclFloat32, ncclMax, nccl_, backend_.stream()));
}

void NcclCommunicator::run_allgather(BufferView send, BufferView recv, size_t bytes_per_rank) {
  if (bytes_per_rank == 0) return;
  if (aborted_) throw Error("NCCL allgather on an aborted communicator");
  NCCL_CHECK(ncclAllGather(send.data, recv.data, bytes_per_rank, ncclInt8, nccl_, backend_.stream()));
}

void NcclCommunicator::run_send(BufferView data, size_t bytes, int peer) {
  if (bytes == 0) return;
  if (aborted_) throw Error("NCCL send on an aborted communicator");
  NCCL_CHECK(ncclGroupStart());
  const ncclResult_t r = ncclSend(data.data, bytes, ncclInt8, peer, nccl_, backend_.stream());
  NCCL_CHECK(ncclGroupEnd());
  nccl_check(r, "ncclSend");
}

void NcclCommunicator::run_recv(BufferView data, size_t bytes, int peer) {
  if (bytes == 0) return;
  if (aborted_) throw Error("NCCL recv on an aborted communicator");
  NCCL_CHECK(ncclGroupStart());
  const ncclResult_t r = ncclRecv(data.data, bytes, ncclInt8, peer, nccl_, backend_.stream());
  NCCL_CHECK(ncclGroupEnd());
  nccl_check(r, "ncclRecv");
}

cudaEvent_t NcclCommunicator::spare_event() {
  if (!spare_events_.empty()) {
    const cudaEvent_t e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  cudaEvent_t e = nullptr;
  TPBATCH_CUDA_CHECK(cudaEventCreate(&e));  // with timing
  return e;
}

void NcclCommunicator::start_timing() {
  if (!started_) started_ = spare_event();
  TPBATCH_CUDA_CHECK(cudaEventRecord(started_, backend_.stream()));
}

void NcclCommunicator::stop_timing(const std::string& op) {
  const cudaEvent_t end = spare_event();
  TPBATCH_CUDA_CHECK(cudaEventRecord(end, backend_.stream()));
  timings_.push_back(Timing{op, started_, end});
  started_ = nullptr;
  read_passed_timings();  // keeps the events in use to those the stream has not reached
}

void NcclCommunicator::read_passed_timings() {
  while (!timings_.empty() && cudaEventQuery(timings_.front().end) == cudaSuccess) {
    const Timing t = timings_.front();
    timings_.pop_front();
    float ms = 0;
    TPBATCH_CUDA_CHECK(cudaEventElapsedTime(&ms, t.start, t.end));
    add_seconds(t.op, ms * 1e-3);
    spare_events_.insert(spare_events_.end(), {t.start, t.end});
  }
}

void NcclCommunicator::settle_timings() {
  if (timings_.empty()) return;
  if (!aborted_ && !backend_.aborted()) backend_.wait_stream("NCCL collective timings");
  read_passed_timings();
}

std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, Backend& cuda_backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&cuda_backend);
  if (!cuda)
    throw Error("make_nccl_communicator: backend '" + cuda_backend.name() + "' is not the CUDA backend");
  return std::make_unique<NcclCommunicator>(comm, *cuda);
}

}  // namespace tpbatch
