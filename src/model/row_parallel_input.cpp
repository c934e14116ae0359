#include "model/row_parallel_input.h"

#include "model/scratch_buffer.h"

namespace tpbatch {

BufferView RowParallelInput::whole_row_amax(Backend& be, Communicator& tp, const LinearWeight& w, BufferView x,
                                            int64_t m, int64_t k) {
  if (tp.size() == 1 || !w.quantized() || w.values.dtype() != DType::I8) return {};
  BufferView amax = grow_scratch(be, amax_, static_cast<size_t>(m), DType::F32);
  be.int8_row_amax(x, amax, m, k);
  tp.allreduce_max(amax, static_cast<size_t>(m));
  return amax;
}

}  // namespace tpbatch
