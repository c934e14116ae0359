#pragma once
// A row-parallel layer (o_proj, down_proj: the weight's input columns split over the TP group)
// multiplies this rank's slice of each input row. W8A8 weights quantize each row of their input
// with one scale, max |x| / 127 (backend/cpu/gemm/gemm.h); for TP > 1 to compute what TP = 1 does,
// that must be the whole row's max, not the slice's. The ranks agree on it first: one allreduce
// (max) of a float per row. Any other weights, or a group of one, need nothing.
#include <cstdint>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "model/linear_weight.h"

namespace tpbatch {

class RowParallelInput {
 public:
  // Each of rows [0, m) of x (k columns, this rank's slice)'s whole-row max |x|, agreed by the
  // ranks, for linear()'s input_amax; an empty view when the weights do not need it. A collective
  // when they do: every rank of the group calls it for the same layer with the same m.
  BufferView whole_row_amax(Backend& be, Communicator& tp, const LinearWeight& w, BufferView x, int64_t m, int64_t k);

 private:
  Buffer amax_;
};

}  // namespace tpbatch
