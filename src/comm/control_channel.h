#pragma once
// The control plane: byte messages between the ranks of one MPI communicator, in host memory --
// steps down a pipeline, rows and results between replicas and the dispatcher, stops. Tensors
// never travel here (they take a data-plane Communicator, communicator.h).
//
// Sends are non-blocking and own their bytes: the channel keeps each message until MPI is done
// with it, so a sender never waits for its peer to listen. Receives probe first, so a message of
// any length arrives whole. Between a pair of ranks messages arrive in the order they were sent.
#include <mpi.h>

#include <cstddef>
#include <list>
#include <string>

namespace tpbatch {

struct ControlMessage {
  int source = -1;  // rank in the channel's communicator
  int tag = -1;
  std::string bytes;
};

class ControlChannel {
 public:
  static constexpr int kAnySource = MPI_ANY_SOURCE;
  static constexpr int kAnyTag = MPI_ANY_TAG;

  // Over `comm` (not owned: it must outlive this). Makes no MPI call until a message moves.
  explicit ControlChannel(MPI_Comm comm) : comm_(comm) {}
  // Waits for the sends still in flight (unless MPI has already been finalised).
  ~ControlChannel();
  ControlChannel(const ControlChannel&) = delete;
  ControlChannel& operator=(const ControlChannel&) = delete;

  // Queues `bytes` to `peer`; returns at once.
  void send(std::string bytes, int peer, int tag);
  // Blocks until a message from `source` with `tag` (or any, kAny*) arrives. `watched`: what the
  // watchdog names if this wait stalls; nullptr for waits that may last (a dispatcher idle
  // between requests).
  ControlMessage recv(int source, int tag, const char* watched = nullptr);
  // Takes such a message if one has arrived; false (and `out` untouched) otherwise.
  bool try_recv(int source, int tag, ControlMessage& out);
  // Collective over the communicator: every rank ends with `root`'s bytes.
  void broadcast(std::string& bytes, int root, const char* watched);
  // Waits until at most `keep` sends are in flight (0: all delivered to MPI's care); bounds the
  // memory held by a sender that runs ahead of its receiver.
  void drain(size_t keep = 0, const char* watched = "control send");
  // Forgets the sends that completed, without waiting.
  void release_completed();
  size_t sends_in_flight() const { return sends_.size(); }

 private:
  ControlMessage receive_probed(const MPI_Status& probed);

  MPI_Comm comm_;
  struct InFlight {
    std::string bytes;  // must not move while MPI reads it: list elements stay put
    MPI_Request request;
  };
  std::list<InFlight> sends_;
};

}  // namespace tpbatch
