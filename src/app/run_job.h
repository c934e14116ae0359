#pragma once
// `tpbatch run JOB.yaml`: the whole pipeline on every rank — job spec -> topology -> model shard
// -> engine -> result writer. Returns the process exit code (MPI already finalized).
#include <string>
#include <vector>

namespace tpbatch {

int run_job(const std::string& job_path, const std::vector<std::string>& set_overrides);

}  // namespace tpbatch
