// Vocab-masked embedding lookup, one thread block per token: out[i,:] = table[ids[i]-vocab_begin,:]
// when ids[i] lies in this shard's [vocab_begin, vocab_end), else zeros (the TP allreduce then sums
// the shards). CPU twin: CpuBackend::embedding.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

template <typename W>
__global__ void embedding_kernel(const int32_t* ids, const W* table, int64_t vocab_begin, int64_t vocab_end,
                                 int64_t dim, float* out) {
  const int64_t id = ids[blockIdx.x];
  float* o = out + blockIdx.x * dim;
  const bool mine = id >= vocab_begin && id < vocab_end;
  const W* row = table + (mine ? id - vocab_begin : 0) * dim;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) o[j] = mine ? to_float(row[j]) : 0.0f;
}

}  // namespace

template <typename W>
void embedding(const int32_t* ids, int64_t count, const W* table, int64_t vocab_begin, int64_t vocab_end, int64_t dim,
               float* out, cudaStream_t stream) {
  if (count == 0) return;
  embedding_kernel<W><<<count, 256, 0, stream>>>(ids, table, vocab_begin, vocab_end, dim, out);
}

template void embedding<float>(const int32_t*, int64_t, const float*, int64_t, int64_t, int64_t, float*, cudaStream_t);
template void embedding<__nv_bfloat16>(const int32_t*, int64_t, const __nv_bfloat16*, int64_t, int64_t, int64_t,
                                       float*, cudaStream_t);
template void embedding<__half>(const int32_t*, int64_t, const __half*, int64_t, int64_t, int64_t, float*,
                                cudaStream_t);

}  // namespace tpbatch::kernels
