#include "reliability/liveness.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/log.h"

namespace tpbatch {

namespace {

bool per_call_requested() {
  const char* env = std::getenv("TPBATCH_LIVENESS");
  return env && std::strcmp(env, "per-call") == 0;
}

}  // namespace

int liveness_thread_level() { return per_call_requested() ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE; }

Liveness::Liveness(int provided, double timeout) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const bool per_call = per_call_requested();
  if (provided >= MPI_THREAD_MULTIPLE && !per_call) {
    heartbeat_ = std::make_unique<Heartbeat>(MPI_COMM_WORLD, timeout);
    return;
  }
  if (rank == 0 && !per_call)
    log_warning("the MPI library does not give MPI_THREAD_MULTIPLE: no heartbeats; a "
                 "blocking call longer than engine.watchdog_seconds ends the job instead");
  watchdog_ = std::make_unique<Watchdog>(timeout, rank);
}

Liveness::~Liveness() { finish(); }

void Liveness::set_timeout(double timeout) {
  if (heartbeat_) heartbeat_->set_timeout(timeout);
  if (watchdog_) watchdog_->set_timeout(timeout);
}

void Liveness::finish() {
  if (heartbeat_) heartbeat_->finish();
  watchdog_.reset();
}

}  // namespace tpbatch
