// Independent chains of one vector instruction in registers: how many the core retires a second,
// for the benchmarks' compute bounds (attention_bench's fp32 FMA peak) and instruction comparisons
// (gemm_bench --instruction-rates). Each returns a value depending on every chain, so none is dropped.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// Intrinsics, not a GCC vector type under target_clones: on AVX2 the compiler kept such accumulators
// on the stack, so every FMA waited on a store and a reload (11-19 GFLOP/s printed on a core that
// runs sgemm at 54-84). In registers they measure the core, ~2 FMA ports x 8 lanes.
#if defined(__x86_64__)
__attribute__((target("avx512f"), noinline)) inline float fma_chains_avx512(long iters, float x) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(x + i);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  for (int i = 1; i < 16; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_reduce_add_ps(a[0]);
}
// (The chain loops are unrolled by pragma: at -O2 GCC would keep a[] in memory.)
// 12 chains: FMA latency 4-5 cycles x 2 ports needs 8-10 in flight; 12 + 2 constants fit 16 ymm.
__attribute__((target("avx2,fma"), noinline)) inline float fma_chains_avx2(long iters, float x) {
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(x + i);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  for (int i = 1; i < 12; ++i) a[0] = _mm256_add_ps(a[0], a[i]);
  float t[8];
  _mm256_storeu_ps(t, a[0]);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif
// SSE (x86-64-v2 has no FMA): a multiply and an add, 4 lanes; counted as 2 flops like an FMA.
__attribute__((noinline)) inline float fma_chains_sse(long iters, float x) {
  typedef float v4 __attribute__((vector_size(16)));
  v4 a[12];
  for (int i = 0; i < 12; ++i) a[i] = v4{} + (x + i);
  const v4 m = v4{} + 0.999999f, c = v4{} + 1e-7f;
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 12; ++i) a[i] = a[i] * m + c;
  for (int i = 1; i < 12; ++i) a[0] += a[i];
  return a[0][0] + a[0][1] + a[0][2] + a[0][3];
}

#if defined(__x86_64__)
// 16 chains of vdpbf16ps zmm (32 bf16 pair products each), as fma_chains_avx512's 16 of vfmadd231ps.
__attribute__((target("avx512f,avx512bf16"), noinline)) inline float dpbf16_chains_avx512(long iters, float x) {
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(x + i);
  const __m512bh m = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3380);  // 1, ~6e-8
  for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_dpbf16_ps(a[i], m, c);
  for (int i = 1; i < 16; ++i) a[0] = _mm512_add_ps(a[0], a[i]);
  return _mm512_reduce_add_ps(a[0]);
}
#endif
