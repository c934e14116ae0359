#pragma once
// Which liveness check a rank runs, chosen once after MPI_Init_thread: heartbeats
// (reliability/heartbeat.h: a rank is dead when it stops beating, however long a call lasts) when
// the MPI library gives MPI_THREAD_MULTIPLE, else the per-call watchdog (reliability/watchdog.h:
// a blocking call longer than the timeout ends the process), with a one-line warning on rank 0.
// TPBATCH_LIVENESS=per-call chooses the per-call watchdog (for comparison and tests).
#include <memory>

#include "reliability/heartbeat.h"
#include "reliability/watchdog.h"

namespace tpbatch {

// The thread level to ask MPI_Init_thread for: MPI_THREAD_MULTIPLE (the heartbeat thread calls
// MPI beside the main thread), MPI_THREAD_FUNNELED under TPBATCH_LIVENESS=per-call.
int liveness_thread_level();

class Liveness {
 public:
  // Collective over MPI_COMM_WORLD. timeout <= 0: nothing is judged.
  Liveness(int provided_thread_level, double timeout_seconds);
  ~Liveness();
  Liveness(const Liveness&) = delete;
  Liveness& operator=(const Liveness&) = delete;

  void set_timeout(double timeout_seconds);
  // Collective: every rank calls it before MPI_Finalize (heartbeats: a watched final barrier).
  void finish();
  bool heartbeats() const { return heartbeat_ != nullptr; }

 private:
  std::unique_ptr<Heartbeat> heartbeat_;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace tpbatch
