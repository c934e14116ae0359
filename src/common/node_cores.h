#pragma once
// The cores of this node, as the default thread counts divide them among its ranks (a run's BLAS
// threads, `plan --calibrate`'s measuring threads and its oversubscription figure): one definition,
// so the plan measures with the threads a run would use.
#include <algorithm>
#include <thread>

namespace tpbatch {

inline int node_cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

}  // namespace tpbatch
