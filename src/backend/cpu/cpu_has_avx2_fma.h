#pragma once
// Whether this CPU runs the AVX2 + FMA kernels (decode attention, vector exp ops); detected once.
// (gemm.cpp also needs F16C and checks that itself.)
namespace tpbatch::cpu {

inline bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace tpbatch::cpu
