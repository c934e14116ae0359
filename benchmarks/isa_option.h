// --isa NAME for the GEMM benchmarks: forces a kernel family at or below the detected one, so one
// machine can time each family's kernels on the same shapes.
#pragma once

#include <cstdio>

#include "backend/cpu/gemm/gemm.h"

inline bool force_isa(const char* name) {
  using namespace tpbatch::cpu;
  GemmIsa isa;
  if (!gemm_isa_named(name, isa)) {
    std::fprintf(stderr, "--isa: portable, avx2-fma-f16c, avx512, avx512-bf16 or amx-bf16, got %s\n", name);
    return false;
  }
  if (isa > gemm_isa()) {
    std::fprintf(stderr, "--isa %s: this CPU runs at most %s\n", name, gemm_isa_name(gemm_isa()));
    return false;
  }
  set_gemm_isa_for_testing(isa);
  return true;
}
