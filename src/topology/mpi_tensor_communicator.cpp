#include "topology/mpi_tensor_communicator.h"

#include <climits>
#include <cstring>

#include "common/error.h"
#include "reliability/watchdog.h"
#include "topology/mpi_group.h"

namespace tpbatch {
MpiTensorCommunicator::MpiTensorCommunicator(MPI_Comm comm, Backend& backend) : comm_(comm), be_(backend) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiTensorCommunicator::~MpiTensorCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) complete_sends(0);
}

void MpiTensorCommunicator::allreduce_sum(BufferView data, size_t count) {
  TimedCall t(stats_["allreduce"], count * dtype_size(data.dtype));
  if (size_ == 1) return;
  WatchedCall w("MPI allreduce");
  be_.host_access(data, count * dtype_size(data.dtype), true, [&](void* p) {
    if (data.dtype == DType::F32) {
      MPI_Allreduce(MPI_IN_PLACE, p, mpi_count(count), MPI_FLOAT, MPI_SUM, comm_);
      return;
    }
    if (data.dtype != DType::BF16 && data.dtype != DType::F16)
      throw Error(std::string("allreduce of ") + dtype_name(data.dtype) + " elements is not supported");
    // 16-bit activations (CUDA staged through the host): summed in fp32, rounded once.
    auto* h = static_cast<uint16_t*>(p);
    std::vector<float> f(count);
    const bool bf = data.dtype == DType::BF16;
    for (size_t i = 0; i < count; ++i) f[i] = bf ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
    MPI_Allreduce(MPI_IN_PLACE, f.data(), mpi_count(count), MPI_FLOAT, MPI_SUM, comm_);
    for (size_t i = 0; i < count; ++i) h[i] = bf ? f32_to_bf16(f[i]) : f32_to_f16(f[i]);
  });
}

void MpiTensorCommunicator::allgather(BufferView send, BufferView recv, size_t bytes_per_rank) {
  TimedCall t(stats_["allgather"], bytes_per_rank * size_);
  std::vector<char> mine(bytes_per_rank);
  be_.host_access(send, bytes_per_rank, false, [&](void* p) { std::memcpy(mine.data(), p, bytes_per_rank); });
  be_.host_access(recv, bytes_per_rank * size_, true, [&](void* p) {
    WatchedCall w("MPI allgather");
    MPI_Allgather(mine.data(), mpi_count(bytes_per_rank), MPI_BYTE, p, mpi_count(bytes_per_rank), MPI_BYTE,
                  comm_);
  });
}

void MpiTensorCommunicator::send(BufferView data, size_t bytes, int peer) {
  TimedCall t(stats_["send"], bytes);
  complete_sends(8);
  sends_.emplace_back();
  Pending& p = sends_.back();
  p.bytes.resize(bytes);
  be_.host_access(data, bytes, false, [&](void* src) { std::memcpy(p.bytes.data(), src, bytes); });
  MPI_Isend(p.bytes.data(), mpi_count(bytes), MPI_BYTE, peer, kTag, comm_, &p.request);
}

void MpiTensorCommunicator::recv(BufferView data, size_t bytes, int peer) {
  TimedCall t(stats_["recv"], bytes);
  be_.host_access(data, bytes, true, [&](void* dst) {
    WatchedCall w("pipeline receive of the hidden state");
    MPI_Recv(dst, mpi_count(bytes), MPI_BYTE, peer, kTag, comm_, MPI_STATUS_IGNORE);
  });
}

void MpiTensorCommunicator::complete_sends(size_t keep) {
  while (sends_.size() > keep) {
    WatchedCall w("pipeline send of the hidden state");
    MPI_Wait(&sends_.front().request, MPI_STATUS_IGNORE);
    sends_.pop_front();
  }
}

}  // namespace tpbatch
