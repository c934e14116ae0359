#pragma once
// Heartbeats: every rank proves it is alive independently of what its main thread is doing, so a
// long wait (rank 0 waiting for a replica's results, a TP worker waiting for its leader, a rank
// in a long prefill) is never taken for a dead peer, and a stopped or dead rank is found wherever
// the others wait (start-up collectives, the row dispatcher, probe-then-receive loops).
//
// A thread per rank sends a tiny beat to every other rank every min(timeout/10, 1 s) on its own
// duplicate of MPI_COMM_WORLD (never mixed with data-plane or control traffic; nonblocking calls
// only, so it needs MPI_THREAD_MULTIPLE), drains the beats it receives, and ends the process when
// a rank has been silent for longer than the timeout, naming that rank and its host. The process
// exits without MPI_Finalize, so mpirun/srun end the others (who also notice the silence).
//
// All-to-all: ranks x (ranks - 1) messages per beat period, i.e. ~4,000 tiny messages per second
// at 64 ranks — fine up to a few hundred ranks; a ring or a rank-0-centred scheme would scale
// further at the cost of slower or indirect detection.
//
// The end of the job is a watched barrier: finish() says "at the end" to every peer, keeps beating
// and watching until every peer has said so too, then says "leaving" (peers stop watching it) and
// stops, so ranks finishing at different times are never taken for dead, and a rank stopped while
// the others finish is still found.
#include <mpi.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

namespace tpbatch {

class Heartbeat {
 public:
  // Collective over world. timeout <= 0: beats flow (for finish()) but nothing is judged.
  Heartbeat(MPI_Comm world, double timeout_seconds);
  ~Heartbeat();  // finish() when not called
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  void set_timeout(double timeout_seconds) { timeout_.store(timeout_seconds); }
  // Collective: returns once every rank called it. Call before MPI_Finalize.
  void finish();

  // The beat period for a timeout: often enough that a few lost rounds never look like silence.
  static double beat_period(double timeout_seconds);

 private:
  void run();
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::vector<std::string> hosts_;
  std::atomic<double> timeout_;
  std::atomic<bool> finishing_{false};
  std::thread thread_;
};

}  // namespace tpbatch
