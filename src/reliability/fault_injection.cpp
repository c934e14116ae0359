#include "reliability/fault_injection.h"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/log.h"

namespace tpbatch {

void stop_self_for_test(const std::string& what) {
  log_info("test: %s", what.c_str());
  std::fflush(stderr);
  raise(SIGSTOP);
}

void maybe_stop_for_test(const char* point, int world_rank) {
  const std::string here = std::to_string(world_rank) + ":" + point;
  if (const char* stop = std::getenv("TPBATCH_TEST_STOP_AT"); stop && here == stop)
    stop_self_for_test("rank " + std::to_string(world_rank) + " stops itself (SIGSTOP) at " + point);
  if (const char* sleep = std::getenv("TPBATCH_TEST_SLEEP_AT")) {
    const std::string s = sleep;
    if (s.compare(0, here.size() + 1, here + ":") != 0) return;
    const double seconds = std::atof(s.c_str() + here.size() + 1);
    log_info("test: rank %d sleeps %.1f s at %s", world_rank, seconds, point);
    std::fflush(stderr);
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }
}

bool test_stops_after_rows(int64_t rows_recorded) {
  static const int64_t stop_at = [] {
    const char* v = std::getenv("TPBATCH_TEST_STOP_AFTER_ROWS");
    return v ? std::atoll(v) : int64_t{-1};
  }();
  return rows_recorded == stop_at;
}

}  // namespace tpbatch
