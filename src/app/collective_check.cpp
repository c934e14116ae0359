#include "app/collective_check.h"

#include <mpi.h>

#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "reliability/model_fingerprint.h"
#include "reliability/watchdog.h"

namespace tpbatch {

int collective_check(const std::function<void()>& fn) {
  int code = 0;
  std::string message;
  try {
    fn();
  } catch (const Error& e) {
    code = e.exit_code();
    message = e.what();
  } catch (const std::exception& e) {
    code = kExitFailure;
    message = e.what();
  }
  int rank = 0, worst = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  {
    WatchedCall w("start-up check (MPI allreduce)");
    MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  }
  if (worst == 0) return 0;
  int reporter = code ? rank : INT32_MAX, first = 0;
  {
    WatchedCall w("start-up check (MPI allreduce)");
    MPI_Allreduce(&reporter, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  }
  if (rank == first) {
    log_error("%s", message.c_str());
    std::fflush(stderr);
  }
  return worst;
}

int check_ranks_agree(const std::string& effective_job, const std::string& model_fingerprint) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const uint64_t mine[2] = {fnv1a64(effective_job.data(), effective_job.size()),
                            fnv1a64(model_fingerprint.data(), model_fingerprint.size())};
  std::vector<uint64_t> all(2 * static_cast<size_t>(size));
  {
    WatchedCall w("start-up check (MPI allgather)");
    MPI_Allgather(mine, 2, MPI_UINT64_T, all.data(), 2, MPI_UINT64_T, MPI_COMM_WORLD);
  }
  std::string job_ranks, model_ranks;
  for (int r = 1; r < size; ++r) {
    if (all[2 * r] != all[0]) job_ranks += (job_ranks.empty() ? "" : ", ") + std::to_string(r);
    if (all[2 * r + 1] != all[1]) model_ranks += (model_ranks.empty() ? "" : ", ") + std::to_string(r);
  }
  if (job_ranks.empty() && model_ranks.empty()) return 0;
  if (rank == 0) {
    std::string msg = "the ranks do not run the same job:";
    if (!job_ranks.empty())
      msg += " the effective job (job file and --set options) of rank" + std::string(job_ranks.find(',') != std::string::npos ? "s " : " ") +
             job_ranks + " differs from rank 0's;";
    if (!model_ranks.empty())
      msg += " the model folder seen by rank" + std::string(model_ranks.find(',') != std::string::npos ? "s " : " ") +
             model_ranks + " differs from rank 0's (config, tokenizer or weights);";
    msg += " start every rank with the same command line, job file and model";
    log_error("%s", msg.c_str());
    std::fflush(stderr);
  }
  return kExitBadJob;
}

}  // namespace tpbatch
