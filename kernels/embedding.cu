// Vocab-masked embedding lookup at the step's tokens, one thread block per row:
// out[i,:] = table[ids[i]-vocab_begin,:] when ids[i] lies in this shard's [vocab_begin, vocab_end),
// else zeros (the TP allreduce then sums the shards). Table F32/BF16/F16, out an activation dtype.
// CPU twin: CpuBackend::embedding.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

template <typename W, typename T>
__global__ void embedding_kernel(const int32_t* ids, const W* table, int64_t vocab_begin, int64_t vocab_end,
                                 int64_t dim, T* out) {
  const int64_t id = ids[blockIdx.x];
  T* o = out + blockIdx.x * dim;
  const bool mine = id >= vocab_begin && id < vocab_end;
  const W* row = table + (mine ? id - vocab_begin : 0) * dim;
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) o[j] = from_float<T>(mine ? to_float(row[j]) : 0.0f);
}

}  // namespace

void embedding(BufferView table, int64_t vocab_begin, int64_t vocab_end, int64_t dim, BufferView out,
               const StepView& step, cudaStream_t stream) {
  if (step.rows == 0 || dim == 0) return;
  dispatch_weight(table.dtype, "embedding", "table", [&](auto wt) {
    dispatch_act(out.dtype, "embedding", "out", [&](auto ot) {
      using W = typename decltype(wt)::type;
      using T = typename decltype(ot)::type;
      embedding_kernel<W, T><<<step.rows, 256, 0, stream>>>(step.tokens, table.as<W>(), vocab_begin, vocab_end, dim,
                                                             out.as<T>());
    });
  });
}

}  // namespace tpbatch::kernels
