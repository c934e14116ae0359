#pragma once
// Debian's OpenBLAS 0.3.21 does not recognise some AVX-512 CPUs (e.g. AMD Zen 4) and silently
// falls back to its SSE3 "Prescott" kernels, 5x slower. The core can only be chosen before the
// library initialises, so main() re-executes itself once with OPENBLAS_CORETYPE set (and
// GOMP_SPINCOUNT=1000, a short spin of the OpenMP workers, which libgomp also reads only at load).
namespace tpbatch {

// Call first thing in main(). May not return (re-exec). Honours a user's OPENBLAS_CORETYPE.
void ensure_fast_blas_core(char** argv);
const char* blas_core_name();

}  // namespace tpbatch
