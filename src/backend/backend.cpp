#include "backend/backend.h"

#include "common/error.h"

namespace tpbatch {

void Buffer::reset() {
  if (owner_ && data_) owner_->release(data_, bytes());
  owner_ = nullptr;
  data_ = nullptr;
  count_ = 0;
}

void Backend::matmul_nt_scaled(BufferView, const ScaledWeightView&, BufferView, int64_t, int64_t, int64_t) {
  throw Error("the " + name() + " backend does not run quantized weights");
}

void Backend::int8_row_amax(BufferView, BufferView, int64_t, int64_t) {
  throw Error("the " + name() + " backend does not run I8 (W8A8) weights");
}

}  // namespace tpbatch
