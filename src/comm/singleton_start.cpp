#include "comm/singleton_start.h"

#include <cstdlib>
#include <initializer_list>

namespace tpbatch {
namespace {

// mpirun, and srun with either PMI, tell the process its place in the job through these.
bool started_without_a_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_FD"})
    if (std::getenv(var)) return false;
  return true;
}

}  // namespace

void prepare_singleton_start() {
  if (!started_without_a_launcher()) return;
  // The singleton forks a support daemon (orted) that only MPI_Comm_spawn needs; tpbatch never
  // spawns, and the daemon costs a single-process run about 0.3 s of start-up.
  setenv("OMPI_MCA_ess_singleton_isolated", "1", /*overwrite=*/0);
  // Creating a session directory races: each singleton makes and, on exit, removes the shared
  // /tmp/ompi.<host>.<uid>, so of several starting at once one can find it gone between its
  // mkdir and its stat, and MPI_Init aborts. A lone process keeps nothing there.
  setenv("OMPI_MCA_orte_create_session_dirs", "0", /*overwrite=*/0);
}

}  // namespace tpbatch
