#include "reliability/shutdown.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace tpbatch {
namespace {

std::atomic<bool> g_stop{false};
int g_rank = 0;

void on_stop(int) { g_stop.store(true); }

void on_fatal(int sig) {
  // Only async-signal-safe calls here.
  char msg[128];
  const int n = std::snprintf(msg, sizeof msg, "tpbatch: rank %d: fatal signal %d (%s); ending the job\n", g_rank, sig,
                              sig == SIGSEGV ? "SIGSEGV" : sig == SIGABRT ? "SIGABRT" : sig == SIGBUS ? "SIGBUS" : "SIGFPE");
  if (n > 0) (void)!write(2, msg, static_cast<size_t>(n));
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void install_signal_handlers(int world_rank) {
  g_rank = world_rank;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // a closed terminal or ssh session: stop as gracefully as SIGTERM
  sa.sa_handler = on_fatal;
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE}) sigaction(sig, &sa, nullptr);
}

bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }
void request_stop() { g_stop.store(true); }

}  // namespace tpbatch
