#pragma once
// A scratch buffer that grows to the largest request it has seen (by a quarter more at a time, so
// a slowly growing batch does not reallocate every step) and is reused after.
#include <algorithm>
#include <cstddef>

#include "backend/backend.h"

namespace tpbatch {

inline BufferView grow_scratch(Backend& be, Buffer& b, size_t count, DType dtype) {
  if (b.count() < count || b.dtype() != dtype) b = be.alloc(std::max(count, b.count() + b.count() / 4), dtype);
  return b.view();
}

}  // namespace tpbatch
