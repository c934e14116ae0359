#include "comm/mpi_tensor_communicator.h"

#include <cstring>

#include "comm/mpi_count.h"
#include "common/error.h"
#include "reliability/watchdog.h"

namespace tpbatch {

MpiTensorCommunicator::MpiTensorCommunicator(MPI_Comm comm, Backend& backend)
    : comm_(comm), be_(backend), sends_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

void MpiTensorCommunicator::run_allreduce_sum(BufferView data, size_t count) {
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

void MpiTensorCommunicator::run_allreduce_max(BufferView data, size_t count) {
  if (size_ == 1) return;
  WatchedCall w("MPI allreduce max");
  be_.host_access(data, count * sizeof(float), true,
                  [&](void* p) { MPI_Allreduce(MPI_IN_PLACE, p, mpi_count(count), MPI_FLOAT, MPI_MAX, comm_); });
}

void MpiTensorCommunicator::run_allgather(BufferView send, BufferView recv, size_t bytes_per_rank) {
  std::vector<char> mine(bytes_per_rank);
  be_.host_access(send, bytes_per_rank, false, [&](void* p) { std::memcpy(mine.data(), p, bytes_per_rank); });
  be_.host_access(recv, bytes_per_rank * size_, true, [&](void* p) {
    WatchedCall w("MPI allgather");
    MPI_Allgather(mine.data(), mpi_count(bytes_per_rank), MPI_BYTE, p, mpi_count(bytes_per_rank), MPI_BYTE,
                  comm_);
  });
}

void MpiTensorCommunicator::run_send(BufferView data, size_t bytes, int peer) {
  sends_.drain(8, "pipeline send of the hidden state");
  std::string copy(bytes, '\0');
  be_.host_access(data, bytes, false, [&](void* src) { std::memcpy(copy.data(), src, bytes); });
  sends_.send(std::move(copy), peer, kTag);
}

void MpiTensorCommunicator::run_recv(BufferView data, size_t bytes, int peer) {
  be_.host_access(data, bytes, true, [&](void* dst) {
    WatchedCall w("pipeline receive of the hidden state");
    MPI_Recv(dst, mpi_count(bytes), MPI_BYTE, peer, kTag, comm_, MPI_STATUS_IGNORE);
  });
}

}  // namespace tpbatch
