#pragma once
// Kernels that carry the bugs the emulated device must diagnose, each beside its correct twin
// (tests/emu/test_planted_bugs.cpp). Host wrappers: they launch on `stream` and return at once.
#include <cuda_runtime.h>

namespace planted {

// out[b*256 + i] = 2 * in[b*256 + i] for `blocks` blocks of 256, by reversing each block's values
// through one shared buffer twice; `barrier_before_reuse` false drops the __syncthreads between
// reading the buffer and overwriting it (the bug: other threads still read the old values).
void reverse_twice(const float* in, float* out, int blocks, bool barrier_before_reuse, cudaStream_t stream);

// out[0] = sum of in[0..n) through n floats of dynamic shared memory; `load_one_past` true loads
// with `i <= n` (the bug: one element past the shared allocation).
void shared_sum(const float* in, float* out, int n, bool load_one_past, cudaStream_t stream);

// out[0] = sum of in[0..threads) by warp shuffles over the full mask, in one block of `threads`
// (the bug: a block that is not a multiple of 32 names lanes that do not exist).
void warp_sum(const float* in, float* out, int threads, cudaStream_t stream);

}  // namespace planted
