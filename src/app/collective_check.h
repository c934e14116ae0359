#pragma once
// Start-up checks that every rank runs: any rank's failure is agreed on collectively, reported
// once (by the lowest failing rank, rank 0 when it failed too) and every rank exits with the same
// code — no rank is left waiting in a collective.
#include <functional>
#include <string>

namespace tpbatch {

// Runs fn; returns 0 when it succeeded on every rank, else the highest exit code of any rank.
// The collectives are watched (reliability/liveness.h): a rank stopped during start-up stops
// beating, and the others end the job naming it.
int collective_check(const std::function<void()>& fn);

// Every rank must run the same job: ranks started with different files or --set options would
// compute wrong rows under a file that claims the layout. Each rank hashes the effective job text
// and the model's fingerprint; returns 0 when all equal rank 0's, else kExitBadJob on every rank,
// rank 0 printing which ranks differ and in what (job settings, model).
int check_ranks_agree(const std::string& effective_job, const std::string& model_fingerprint);

}  // namespace tpbatch
