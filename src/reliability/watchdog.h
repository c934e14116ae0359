#pragma once
// A watchdog on blocking communication. Each blocking call marks itself with a WatchedCall;
// a background thread ends the process when one lasts longer than the timeout, saying which rank
// and which call stalled. The process exits without MPI_Finalize, so mpirun/srun end the others.
// The fallback liveness check (reliability/liveness.h) where the MPI library gives no
// MPI_THREAD_MULTIPLE: it cannot tell a long wait from a dead peer and does not
// see waits that are not marked (rank 0's dispatcher). With heartbeats, WatchedCall only names
// what the main thread was doing in the heartbeat's message.
#include <atomic>
#include <chrono>
#include <thread>

namespace tpbatch {

class Watchdog {
 public:
  Watchdog(double timeout_seconds, int world_rank);  // timeout <= 0: disabled
  // Start-up runs under a default timeout; the job's engine.watchdog_seconds replaces it once read.
  void set_timeout(double timeout_seconds) { timeout_.store(timeout_seconds); }
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  void run();
  std::atomic<double> timeout_;
  int rank_;
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

// The blocking call the main thread is in (the outermost WatchedCall), or nullptr: for messages.
const char* current_watched_call();

// Marks the current thread's blocking call (nesting: the outermost counts).
class WatchedCall {
 public:
  explicit WatchedCall(const char* what);
  ~WatchedCall();
  WatchedCall(const WatchedCall&) = delete;
  WatchedCall& operator=(const WatchedCall&) = delete;

 private:
  bool outermost_;
};

}  // namespace tpbatch
