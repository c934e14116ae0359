#pragma once
// Start-up checks that every rank runs: any rank's failure is agreed on collectively, reported
// once (by the lowest failing rank, rank 0 when it failed too) and every rank exits with the same
// code — no rank is left waiting in a collective.
#include <functional>

namespace tpbatch {

// Runs fn; returns 0 when it succeeded on every rank, else the highest exit code of any rank.
int collective_check(const std::function<void()>& fn);

}  // namespace tpbatch
