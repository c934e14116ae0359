#include "reliability/heartbeat.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "reliability/peer_watch.h"
#include "reliability/watchdog.h"

namespace tpbatch {
namespace {

constexpr int kBeatTag = 1;
// What a beat says. Sent from static storage: the buffers outlive every send.
enum Beat : int32_t { kAlive = 1, kAtEnd = 2, kLeaving = 3 };
const int32_t kBeatValue[4] = {0, kAlive, kAtEnd, kLeaving};

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One nonblocking send per peer and kind at a time: a peer that does not drain (stopped) gets no
// pile of requests, and a pending beat never delays the "at the end" or "leaving" messages.
class BeatSender {
 public:
  BeatSender(MPI_Comm comm, int size) : comm_(comm), pending_(4 * static_cast<size_t>(size), MPI_REQUEST_NULL) {}
  void send_all(Beat kind, int self, int size) {
    for (int peer = 0; peer < size; ++peer) {
      if (peer == self) continue;
      MPI_Request& r = pending_[4 * static_cast<size_t>(peer) + kind];
      if (r != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (!done) continue;  // the previous one still travels: this one would say nothing new
      }
      MPI_Isend(&kBeatValue[kind], 1, MPI_INT32_T, peer, kBeatTag, comm_, &r);
    }
  }
  // Sends not yet complete are left to finish on their own (eager: they already left).
  void release() {
    for (MPI_Request& r : pending_) {
      if (r == MPI_REQUEST_NULL) continue;
      int done = 0;
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
      if (!done) MPI_Request_free(&r);
    }
  }

 private:
  MPI_Comm comm_;
  std::vector<MPI_Request> pending_;
};

std::string rank_list(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i) s += ", ";
    s += "rank " + std::to_string(ranks[i]) + " (host " + hosts[static_cast<size_t>(ranks[i])] + ")";
  }
  return s;
}

}  // namespace

// timeout <= 0 (off): beats only serve finish(), once a second is plenty.
double Heartbeat::beat_period(double timeout) { return timeout > 0 ? std::clamp(timeout / 10, 0.02, 1.0) : 1.0; }

Heartbeat::Heartbeat(MPI_Comm world, double timeout) : timeout_(timeout) {
  MPI_Comm_dup(world, &comm_);
  // A peer that already finalized must not turn a late beat into an abort.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  std::vector<char> all(static_cast<size_t>(size_) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm_);
  for (int r = 0; r < size_; ++r) {
    const char* h = all.data() + static_cast<size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    hosts_.emplace_back(h, strnlen(h, MPI_MAX_PROCESSOR_NAME));
  }
  thread_ = std::thread([this] { run(); });
}

Heartbeat::~Heartbeat() { finish(); }

void Heartbeat::finish() {
  finishing_.store(true);
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::run() {
  double t = now_seconds();
  PeerWatch watch(size_, rank_, t);
  BeatSender sender(comm_, size_);
  std::vector<bool> at_end(static_cast<size_t>(size_), false);
  int peers_at_end = 0;
  bool said_end = false;
  double last_beat = -1e300, timeout_seen = timeout_.load();
  // TPBATCH_HEARTBEAT_STATS=1: each rank prints, at the end, how close healthy peers came to the
  // timeout (the margin against false alarms on this machine).
  const bool stats = std::getenv("TPBATCH_HEARTBEAT_STATS") != nullptr;
  double longest_gap = 0, longest_silence = 0, prev_round = t;
  int quietest = -1;
  for (;;) {
    t = now_seconds();
    const double timeout = timeout_.load();
    const double period = beat_period(timeout);
    if (timeout != timeout_seen) {  // peers' last beats came at the old pace
      watch.restart(t);
      timeout_seen = timeout;
    }
    // A round long after the previous one (this process was stopped or starved) judges no one.
    longest_gap = std::max(longest_gap, t - prev_round);
    prev_round = t;
    watch.start_round(t, timeout / 2);
    for (;;) {  // drain what arrived
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kBeatTag, comm_, &flag, &st) != MPI_SUCCESS || !flag) break;
      int32_t kind = 0;
      MPI_Recv(&kind, 1, MPI_INT32_T, st.MPI_SOURCE, kBeatTag, comm_, MPI_STATUS_IGNORE);
      const int from = st.MPI_SOURCE;
      watch.beat(from, now_seconds());
      if (kind == kAtEnd && !at_end[static_cast<size_t>(from)]) {
        at_end[static_cast<size_t>(from)] = true;
        ++peers_at_end;
      }
      if (kind == kLeaving) watch.forget(from);  // it passed the end: its silence is expected
    }
    t = now_seconds();
    if (finishing_.load() && !said_end) {
      sender.send_all(kAtEnd, rank_, size_);
      said_end = true;
      last_beat = t;
    } else if (t - last_beat >= period) {
      sender.send_all(kAlive, rank_, size_);
      last_beat = t;
    }
    if (said_end && peers_at_end == size_ - 1) {  // everyone reached the end
      sender.send_all(kLeaving, rank_, size_);
      sender.release();
      if (stats)
        log_info("rank %d heartbeats: longest gap between own rounds %.3f s, longest silence "
                     "of a peer %.3f s (rank %d), timeout %g s", rank_, longest_gap, longest_silence, quietest, timeout);
      return;
    }
    if (stats)
      for (int r = 0; r < size_; ++r)
        if (r != rank_ && t - watch.last_heard(r) > longest_silence) {
          longest_silence = t - watch.last_heard(r);
          quietest = r;
        }
    const std::vector<int> silent = watch.silent(t, timeout);
    if (!silent.empty()) {
      const char* call = current_watched_call();
      log_plain(
                   "tpbatch: rank %d (host %s): liveness: %s %s silent: no heartbeat for %.1f s "
                   "(engine.watchdog_seconds = %g); stopped, dead or cut off; ending the job (this rank was %s%s)",
                   rank_, hosts_[static_cast<size_t>(rank_)].c_str(), rank_list(silent, hosts_).c_str(),
                   silent.size() == 1 ? "is" : "are", t - watch.last_heard(silent[0]), timeout,
                   said_end ? "at the end of the job" : call ? "in " : "computing or waiting for work",
                   !said_end && call ? call : "");
      std::fflush(stderr);
      _exit(1);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(std::min(period / 2, 0.1)));
  }
}

}  // namespace tpbatch
