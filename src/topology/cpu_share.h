#pragma once
// The CPUs this rank may run on and how many ranks of its machine share them: the one definition of
// the default CPU threads per rank (a run's BLAS and OpenMP threads, `plan --calibrate`'s measuring
// threads) and of the machine's cores (the plan's oversubscription figure), so the plan measures
// with the threads a run would use.
//
// A rank counts the CPUs of its affinity mask (sched_getaffinity: a Slurm cpuset, mpirun's core
// binding, taskset), not the machine's: 2 ranks on an 8-CPU cpuset of a 64-core node get 4 threads
// each, not 32. The ranks of one physical machine (MPI_COMM_TYPE_SHARED, never the emulated
// parallel.ranks_per_node nodes: CPUs are shared physically) exchange their masks; a rank's CPUs
// are divided by the most local ranks that hold any one of them.
#include <cstdint>
#include <vector>

namespace tpbatch {

// CPU c is bit c % 64 of word c / 64.
using CpuMask = std::vector<uint64_t>;

struct CpuShare {
  int own_cpus = 1;      // CPUs in this rank's mask
  int sharing = 1;       // the most local ranks (this one included) whose masks hold one of its CPUs
  int threads = 1;       // default threads of this rank: max(1, own_cpus / sharing)
  int machine_cpus = 1;  // CPUs in the union of the local ranks' masks: the machine's cores for the plan
  int local_ranks = 1;   // ranks on this machine
};

// Pure: the share of masks[self] among the masks of one machine's ranks (masks may differ in length).
CpuShare share_cpus(const std::vector<CpuMask>& masks, int self);

// This process's affinity mask (every CPU the machine reports when it cannot be read).
CpuMask own_cpu_mask();

// When MPI is initialised: collective over MPI_COMM_WORLD (every rank must call it at the same
// point), the masks of the ranks on this physical machine. Otherwise this process's mask alone.
CpuShare cpu_share();

}  // namespace tpbatch
