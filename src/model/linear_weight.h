#pragma once
// The weights of one linear layer as a rank holds them: dense (F32, BF16 or F16), or quantized --
// F8_E4M3 values, or I4 values with fp32 zero points, with fp32 scales per output row and
// input-column group (backend.h's ScaledWeightView; model/quantization.h says which checkpoints
// come so).
#include <cstdint>

#include "backend/backend.h"

namespace tpbatch {

struct LinearWeight {
  Buffer values;  // [n, k] (I4: [n, (k + 1) / 2] bytes of two values)
  Buffer scales;  // [n, groups] F32; empty when dense
  Buffer zeros;   // [n, groups] F32 for I4 values; empty otherwise
  int64_t groups = 1, group = 1, phase = 0;

  bool empty() const { return values.empty(); }
  bool quantized() const { return !scales.empty(); }
  size_t bytes() const { return values.bytes() + scales.bytes() + zeros.bytes(); }
  ScaledWeightView scaled_view() const {
    return {values.view(), scales.view(), groups, group, phase, zeros.empty() ? BufferView{} : zeros.view(), {}};
  }
};

// y[m,n] = x[m,k] · wᵀ on the backend, whichever form w has. input_amax: for I8 weights whose x is
// a slice of its rows, each whole row's max |x| (model/row_parallel_input.h); empty otherwise.
inline void linear(Backend& be, BufferView x, const LinearWeight& w, BufferView y, int64_t m, int64_t n, int64_t k,
                   BufferView input_amax = {}) {
  if (w.quantized()) {
    ScaledWeightView v = w.scaled_view();
    v.input_amax = input_amax;
    be.matmul_nt_scaled(x, v, y, m, n, k);
  } else
    be.matmul_nt(x, w.values.view(), y, m, n, k);
}

}  // namespace tpbatch
