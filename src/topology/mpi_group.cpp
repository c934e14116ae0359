#include "topology/mpi_group.h"

#include <chrono>
#include <climits>
#include <cstring>

#include "common/error.h"
#include "reliability/watchdog.h"

namespace tpbatch {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int mpi_count(size_t n) {
  if (n > static_cast<size_t>(INT_MAX)) throw Error("MPI message of " + std::to_string(n) + " elements is too large");
  return static_cast<int>(n);
}

TimedCall::TimedCall(CollectiveStats& s, size_t bytes) : s_(s), t0_(now_seconds()) {
  s_.calls++;
  s_.bytes += static_cast<int64_t>(bytes);
}
TimedCall::~TimedCall() { s_.seconds += now_seconds() - t0_; }

MpiGroup::MpiGroup(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiGroup::~MpiGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiGroup::allreduce_sum(float* data, size_t count) {
  WatchedCall w("MPI allreduce");
  TimedCall t(stats_["allreduce"], count * sizeof(float));
  if (size_ == 1) return;
  MPI_Allreduce(MPI_IN_PLACE, data, mpi_count(count), MPI_FLOAT, MPI_SUM, comm_);
}

void MpiGroup::allgather(const void* send, void* recv, size_t bytes_per_rank) {
  WatchedCall w("MPI allgather");
  TimedCall t(stats_["allgather"], bytes_per_rank * size_);
  if (size_ == 1) {
    if (recv != send && bytes_per_rank) std::memcpy(recv, send, bytes_per_rank);
    return;
  }
  MPI_Allgather(send, mpi_count(bytes_per_rank), MPI_BYTE, recv, mpi_count(bytes_per_rank), MPI_BYTE, comm_);
}

void MpiGroup::broadcast(void* data, size_t bytes, int root) {
  WatchedCall w("MPI broadcast");
  TimedCall t(stats_["broadcast"], bytes);
  if (size_ == 1) return;
  MPI_Bcast(data, mpi_count(bytes), MPI_BYTE, root, comm_);
}

void MpiGroup::send(const void* data, size_t bytes, int peer, int tag) {
  WatchedCall w("MPI send");
  TimedCall t(stats_["send"], bytes);
  MPI_Send(data, mpi_count(bytes), MPI_BYTE, peer, tag, comm_);
}

void MpiGroup::recv(void* data, size_t bytes, int peer, int tag) {
  WatchedCall w("MPI recv");
  TimedCall t(stats_["recv"], bytes);
  MPI_Recv(data, mpi_count(bytes), MPI_BYTE, peer, tag, comm_, MPI_STATUS_IGNORE);
}

void MpiGroup::barrier() {
  WatchedCall w("MPI barrier");
  TimedCall t(stats_["barrier"], 0);
  MPI_Barrier(comm_);
}

}  // namespace tpbatch
