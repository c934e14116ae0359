#pragma once
// A watchdog on blocking communication. Each blocking call marks itself with a WatchedCall;
// a background thread ends the process when one lasts longer than the timeout, saying which rank
// and which call stalled. The process exits without MPI_Finalize, so mpirun/srun end the others.
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
