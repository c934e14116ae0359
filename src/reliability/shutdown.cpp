#include "reliability/shutdown.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

namespace tpbatch {
namespace {

std::atomic<bool> g_stop{false};
int g_rank = -1;      // the job's rank; -1: not a job (another command)
char g_doing[512];    // name_fatal_signals_while's text, set before any signal may need it

void on_stop(int) { g_stop.store(true); }

void on_fatal(int sig) {
  // Only async-signal-safe calls here (snprintf of plain integers and strings does not allocate).
  char msg[768];
  const char* name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGABRT ? "SIGABRT" : sig == SIGBUS ? "SIGBUS" : "SIGFPE";
  const int n = g_rank >= 0 ? std::snprintf(msg, sizeof msg, "tpbatch: rank %d: fatal signal %d (%s); ending the job\n",
                                            g_rank, sig, name)
                            : std::snprintf(msg, sizeof msg, "tpbatch: fatal signal %d (%s) while %s\n", sig, name, g_doing);
  if (n > 0) (void)!write(2, msg, std::min(static_cast<size_t>(n), sizeof msg - 1));
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_fatal_handlers() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_fatal;
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE}) sigaction(sig, &sa, nullptr);
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
  install_fatal_handlers();
}

void name_fatal_signals_while(const std::string& doing) {
  std::snprintf(g_doing, sizeof g_doing, "%s", doing.c_str());
  install_fatal_handlers();
}

bool stop_requested() { return g_stop.load(std::memory_order_relaxed); }
void request_stop() { g_stop.store(true); }

}  // namespace tpbatch
