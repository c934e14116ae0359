#include "comm/control_channel.h"

#include <cstdint>

#include "comm/mpi_count.h"
#include "reliability/watchdog.h"

namespace tpbatch {

ControlChannel::~ControlChannel() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) drain(0);
}

void ControlChannel::send(std::string bytes, int peer, int tag) {
  sends_.emplace_back();
  InFlight& s = sends_.back();
  s.bytes = std::move(bytes);
  MPI_Isend(s.bytes.data(), mpi_count(s.bytes.size()), MPI_BYTE, peer, tag, comm_, &s.request);
}

ControlMessage ControlChannel::receive_probed(const MPI_Status& probed) {
  int count = 0;
  MPI_Get_count(&probed, MPI_BYTE, &count);
  ControlMessage m;
  m.source = probed.MPI_SOURCE;
  m.tag = probed.MPI_TAG;
  m.bytes.resize(static_cast<size_t>(count));
  // The probed message itself (its source and tag): another one cannot overtake it.
  MPI_Recv(m.bytes.data(), count, MPI_BYTE, m.source, m.tag, comm_, MPI_STATUS_IGNORE);
  return m;
}

ControlMessage ControlChannel::recv(int source, int tag, const char* watched) {
  MPI_Status st;
  if (watched) {
    WatchedCall w(watched);
    MPI_Probe(source, tag, comm_, &st);
  } else {
    MPI_Probe(source, tag, comm_, &st);
  }
  return receive_probed(st);
}

bool ControlChannel::try_recv(int source, int tag, ControlMessage& out) {
  MPI_Status st;
  int ready = 0;
  MPI_Iprobe(source, tag, comm_, &ready, &st);
  if (!ready) return false;
  out = receive_probed(st);
  return true;
}

void ControlChannel::broadcast(std::string& bytes, int root, const char* watched) {
  int size = 1;
  MPI_Comm_size(comm_, &size);
  if (size == 1) return;
  WatchedCall w(watched);
  int64_t length = static_cast<int64_t>(bytes.size());
  MPI_Bcast(&length, 1, MPI_INT64_T, root, comm_);
  bytes.resize(static_cast<size_t>(length));
  MPI_Bcast(bytes.data(), mpi_count(bytes.size()), MPI_BYTE, root, comm_);
}

void ControlChannel::drain(size_t keep, const char* watched) {
  while (sends_.size() > keep) {
    WatchedCall w(watched);
    MPI_Wait(&sends_.front().request, MPI_STATUS_IGNORE);
    sends_.pop_front();
  }
}

void ControlChannel::release_completed() {
  for (auto it = sends_.begin(); it != sends_.end();) {
    int done = 0;
    MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
    it = done ? sends_.erase(it) : std::next(it);
  }
}

}  // namespace tpbatch
