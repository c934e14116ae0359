// Gathers the rows whose logits the step wants (StepView::logit_rows), one thread block per
// output row: out[i,:] = x[logit_rows[first+i],:]. Element size 2 or 4 bytes, moved as such.
// CPU twin: CpuBackend::gather_logit_rows.
#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

template <typename E>
__global__ void gather_kernel(const E* x, int64_t dim, const int32_t* rows, E* out) {
  const int64_t src = rows[blockIdx.x];
  for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) out[blockIdx.x * dim + j] = x[src * dim + j];
}

}  // namespace

void gather_logit_rows(BufferView x, int64_t dim, int64_t first, int64_t count, BufferView out, const StepView& step,
                       cudaStream_t stream) {
  if (count == 0 || dim == 0) return;
  if (out.dtype != x.dtype) unsupported("gather_logit_rows", "out (differs from x)", out.dtype);
  if (first < 0 || first + count > step.num_logit_rows)
    throw Error("CUDA backend: gather_logit_rows: rows [" + std::to_string(first) + ", " +
                std::to_string(first + count) + ") outside the step's " + std::to_string(step.num_logit_rows) +
                " logit rows");
  if (dtype_size(x.dtype) == 2)
    gather_kernel<uint16_t><<<count, 256, 0, stream>>>(x.as<uint16_t>(), dim, step.logit_rows + first,
                                                        out.as<uint16_t>());
  else
    gather_kernel<uint32_t><<<count, 256, 0, stream>>>(x.as<uint32_t>(), dim, step.logit_rows + first,
                                                        out.as<uint32_t>());
}

}  // namespace tpbatch::kernels
