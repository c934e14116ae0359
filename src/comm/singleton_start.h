#pragma once

namespace tpbatch {

// Before MPI_Init: when no launcher (mpirun, srun) started this process, tells Open MPI that the
// lone process it is about to become needs neither a support daemon nor a session directory.
// The user's own settings win. Under a launcher it does nothing.
void prepare_singleton_start();

}  // namespace tpbatch
