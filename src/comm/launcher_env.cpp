#include "comm/launcher_env.h"

#include <cstdlib>
#include <initializer_list>

namespace tpbatch {

bool started_by_a_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_FD"})
    if (std::getenv(var)) return true;
  return false;
}

int launched_world_size() {
  if (!started_by_a_launcher()) return 1;
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"})
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  return 1;
}

}  // namespace tpbatch
