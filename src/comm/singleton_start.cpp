#include "comm/singleton_start.h"

#include <cstdlib>

#include "comm/launcher_env.h"

namespace tpbatch {

void prepare_singleton_start() {
  if (started_by_a_launcher()) return;
  // The singleton forks a support daemon (orted) that only MPI_Comm_spawn needs; tpbatch never
  // spawns, and the daemon costs a single-process run about 0.3 s of start-up.
  setenv("OMPI_MCA_ess_singleton_isolated", "1", /*overwrite=*/0);
  // Creating a session directory races: each singleton makes and, on exit, removes the shared
  // /tmp/ompi.<host>.<uid>, so of several starting at once one can find it gone between its
  // mkdir and its stat, and MPI_Init aborts. A lone process keeps nothing there.
  setenv("OMPI_MCA_orte_create_session_dirs", "0", /*overwrite=*/0);
}

}  // namespace tpbatch
