// Constrained rows' logits on a vocabulary shard: -inf where the row's bit is clear. The mask
// crosses to the device as 1 bit a token (16 KiB a row at a 128k vocabulary, where an additive
// float bias would be 512 KiB). One thread a logit; the 64 threads of a word read the same word.
// CPU twin: CpuBackend::mask_logits.
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr unsigned kThreads = 256;

__global__ void mask_logits_kernel(float* logits, const uint64_t* bits, int64_t rows, int64_t vocab_shard,
                                   int64_t words) {
  const size_t count = static_cast<size_t>(rows * vocab_shard);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    const int64_t row = static_cast<int64_t>(i / vocab_shard), j = static_cast<int64_t>(i % vocab_shard);
    if (((bits[row * words + j / 64] >> (j % 64)) & 1u) == 0) logits[i] = -INFINITY;
  }
}

}  // namespace

void mask_logits(BufferView logits, int64_t rows, int64_t vocab_shard, BufferView bits, cudaStream_t stream) {
  if (rows == 0 || vocab_shard == 0) return;
  if (logits.dtype != DType::F32) unsupported("mask_logits", "logits", logits.dtype);
  if (bits.dtype != DType::I64) unsupported("mask_logits", "bits", bits.dtype);
  const size_t count = static_cast<size_t>(rows * vocab_shard);
  mask_logits_kernel<<<grid_for(count, kThreads), kThreads, 0, stream>>>(
      logits.as<float>(), bits.as<uint64_t>(), rows, vocab_shard, (vocab_shard + 63) / 64);
}

}  // namespace tpbatch::kernels
