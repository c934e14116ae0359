#pragma once
// <immintrin.h> for the AVX-512 / AMX kernel files. GCC 12 flags its own AVX-512 intrinsics'
// _mm512_undefined_*() (self-initialised on purpose) as uninitialised once they are inlined into
// a kernel; the warnings point into its headers, so they are off from their inclusion on, for the
// rest of the including file (GCC only: clang does not warn, and has no -Wmaybe-uninitialized).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
