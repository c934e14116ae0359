#pragma once
// Test hooks for the liveness checks (reliability/liveness.h). Unset (always, outside tests):
// nothing happens.
//   TPBATCH_TEST_STOP_AT=<rank>:<point>            that world rank stops itself (SIGSTOP, as
//     `kill -STOP` would) at the point: a moment too short to hit from outside.
//   TPBATCH_TEST_SLEEP_AT=<rank>:<point>:<seconds> that rank's main thread sleeps there, as in a
//     long compute step: its peers wait on it longer than the watchdog time, and must not take
//     it for dead.
// Points: "start-up" (after the job file is read; the others wait in a start-up collective) and
// "run" (before the rows are handed out; the other replicas wait for rows from rank 0).
//   TPBATCH_TEST_STOP_AFTER_ROWS=<n>               rank 0 stops itself (SIGSTOP) once the n-th row of
//     the run is recorded and flushed: the job is frozen part-way, so a test's kill lands on a job
//     that cannot have finished, however fast it is or however late the test looks.
#include <cstdint>
#include <string>

namespace tpbatch {

void maybe_stop_for_test(const char* point, int world_rank);
bool test_stops_after_rows(int64_t rows_recorded);  // true at the n-th row of TPBATCH_TEST_STOP_AFTER_ROWS
void stop_self_for_test(const std::string& what);     // says `what` on stderr, then SIGSTOP

}  // namespace tpbatch
