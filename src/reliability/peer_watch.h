#pragma once
// Who has been heard from lately: the bookkeeping behind the heartbeats (reliability/heartbeat.h),
// kept free of MPI and of clocks so it can be tested on its own. Times are seconds on the
// observer's monotonic clock.
//
// A peer is "silent" when no beat of its arrived for longer than the timeout while this rank was
// watching. A rank that was itself stopped or starved (its watch rounds came far apart) cannot
// tell a silent peer from its own absence, so such a gap restarts every peer's clock instead of
// accusing them. A peer that said it is leaving (it passed the end of the job) is no longer watched.
#include <cstddef>
#include <vector>

namespace tpbatch {

class PeerWatch {
 public:
  PeerWatch(int ranks, int self, double now);

  // One watch round starts at `now`. A round later than `max_gap` after the previous one means
  // this rank was not watching: every peer's clock restarts (returns true when that happened).
  bool start_round(double now, double max_gap);
  // Every peer's clock restarts at now (the timeout changed: beats came at the old pace).
  void restart(double now);
  void beat(int rank, double now);
  void forget(int rank);  // no longer watched

  // Watched peers not heard from for longer than timeout (none when timeout <= 0).
  std::vector<int> silent(double now, double timeout) const;
  double last_heard(int rank) const { return last_[static_cast<size_t>(rank)]; }

 private:
  double last_round_;
  std::vector<double> last_;
  std::vector<bool> forgotten_;
};

}  // namespace tpbatch
