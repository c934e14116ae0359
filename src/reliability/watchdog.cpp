#include "reliability/watchdog.h"

#include <unistd.h>

#include <cstdio>

#include "common/log.h"

namespace tpbatch {
namespace {

using Clock = std::chrono::steady_clock;
std::atomic<const char*> g_call{nullptr};
std::atomic<int64_t> g_since_ns{0};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

}  // namespace

const char* current_watched_call() { return g_call.load(); }

WatchedCall::WatchedCall(const char* what) : outermost_(g_call.load() == nullptr) {
  if (!outermost_) return;
  g_since_ns.store(now_ns());
  g_call.store(what);
}

WatchedCall::~WatchedCall() {
  if (outermost_) g_call.store(nullptr);
}

Watchdog::Watchdog(double timeout, int rank) : timeout_(timeout), rank_(rank) {
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  quit_.store(true);
  if (thread_.joinable()) thread_.join();
}

void Watchdog::run() {
  while (!quit_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    const char* call = g_call.load();
    const double timeout = timeout_.load();
    if (!call || timeout <= 0) continue;
    const double stalled = static_cast<double>(now_ns() - g_since_ns.load()) * 1e-9;
    if (call == g_call.load() && stalled > timeout) {
      log_plain(
                   "tpbatch: rank %d: watchdog: stalled for %.0f s in %s (engine.watchdog_seconds = %.0f); a peer "
                   "rank is probably dead or stuck; ending the job",
                   rank_, stalled, call, timeout);
      std::fflush(stderr);
      _exit(1);
    }
  }
}

}  // namespace tpbatch
