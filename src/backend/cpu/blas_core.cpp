#include "backend/cpu/blas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace tpbatch {

const char* blas_core_name() { return openblas_get_corename(); }

void ensure_fast_blas_core(char** argv) {
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv("TPBATCH_BLAS_REEXEC")) return;
  std::string core = openblas_get_corename();
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (core != "prescott" && core != "core2" && core != "nehalem") return;
  __builtin_cpu_init();
  const char* better = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    better = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    better = "Haswell";
  if (!better) return;
  setenv("OPENBLAS_CORETYPE", better, 1);
  setenv("TPBATCH_BLAS_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);  // on failure, carry on with the slow core
}

}  // namespace tpbatch
