#include "backend/cpu/gemm/blas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace tpbatch {

const char* blas_core_name() { return openblas_get_corename(); }

namespace {

// The faster OpenBLAS core for this CPU when OpenBLAS fell back to a generic one, else null.
const char* better_core() {
  if (std::getenv("OPENBLAS_CORETYPE")) return nullptr;  // the user's choice
  std::string core = openblas_get_corename();
  for (char& c : core) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (core != "prescott" && core != "core2" && core != "nehalem") return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

}  // namespace

void ensure_fast_blas_core(char** argv) {
  if (std::getenv("TPBATCH_RUNTIME_REEXEC")) return;
  bool changed = false;
  if (const char* core = better_core()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    changed = true;
  }
  // How OpenMP workers wait between parallel regions (libgomp reads it at load). A decode step
  // opens ~60 regions; a worker asleep on a futex is woken through the kernel, on a VM ~100 us a
  // region, and libgomp's default spins up to 300000 pauses (milliseconds), stealing the core from
  // whatever else runs there. A short spin catches the next region of the same step and then
  // sleeps. Measured (125M, one sequence, 2 threads, tpot p50, Sapphire-Rapids-class VM, 3 rounds):
  // quiet, F32 / BF16 passive 16.0-16.5 / 10.6-11.1 ms, GOMP_SPINCOUNT=1000 12.0-13.7 / 6.1-7.2,
  // 3000 11.8-12.7 / 6.0-6.9, active 11.5-12.8 / 6.3-6.7; beside one busy process, passive
  // 24.7-25.4 / 13.5-15.1, 1000 25.6-26.2 / 15.2-15.9, 3000 28.4-28.7 / 18.6, active 36-37 / 21-26.
  // A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("GOMP_SPINCOUNT", "1000", 1);
    changed = true;
  }
  if (!changed) return;
  setenv("TPBATCH_RUNTIME_REEXEC", "1", 1);
  execv("/proc/self/exe", argv);  // on failure, carry on as we are
}

}  // namespace tpbatch
