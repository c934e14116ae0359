#include "backend/backend.h"

namespace tpbatch {

void Buffer::reset() {
  if (owner_ && data_) owner_->release(data_, bytes());
  owner_ = nullptr;
  data_ = nullptr;
  count_ = 0;
}

}  // namespace tpbatch
