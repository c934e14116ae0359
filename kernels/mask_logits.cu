// Constrained rows' logits on a vocabulary shard: -inf where the row's bit is clear. The mask
// crosses to the device as 1 bit a token (16 KiB a row at a 128k vocabulary, where an additive
// float bias would be 512 KiB). One thread a logit; the 64 threads of a word read the same word.
// CPU twin: CpuBackend::mask_logits.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr unsigned kThreads = 256;
constexpr int64_t kMaxGridRows = 65535;

// Block row y masks row y.
__global__ void mask_logits_kernel(float* logits, const uint64_t* bits, int64_t vocab_shard, int64_t words) {
  float* row = logits + blockIdx.y * vocab_shard;
  const uint64_t* mask = bits + blockIdx.y * words;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < vocab_shard; j += int64_t(gridDim.x) * blockDim.x)
    if (((mask[j >> 6] >> (j & 63)) & 1u) == 0) row[j] = -INFINITY;
}

}  // namespace

void mask_logits(BufferView logits, int64_t rows, int64_t vocab_shard, BufferView bits, cudaStream_t stream) {
  if (rows == 0 || vocab_shard == 0) return;
  if (logits.dtype != DType::F32) unsupported("mask_logits", "logits", logits.dtype);
  if (bits.dtype != DType::I64) unsupported("mask_logits", "bits", bits.dtype);
  const int64_t words = mask_words_per_row(vocab_shard);
  const unsigned across = std::min(blocks_for(static_cast<size_t>(vocab_shard), kThreads), 1024u);
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxGridRows) {  // grid.y is at most 65535
    const dim3 grid(across, static_cast<unsigned>(std::min(kMaxGridRows, rows - r0)));
    mask_logits_kernel<<<grid, kThreads, 0, stream>>>(logits.as<float>() + r0 * vocab_shard,
                                                      bits.as<uint64_t>() + r0 * words, vocab_shard, words);
  }
}

}  // namespace tpbatch::kernels
