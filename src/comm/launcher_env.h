#pragma once
// What mpirun, or srun with PMI or PMIx, tells a process about its job through the environment,
// read before MPI_Init (which needs to know whether it is a singleton).

namespace tpbatch {

// Whether a launcher started this process (one of its ranks), rather than a shell.
bool started_by_a_launcher();

// The number of processes the launcher started: 1 when none did (srun without PMI included: its
// tasks come up as MPI singletons).
int launched_world_size();

}  // namespace tpbatch
