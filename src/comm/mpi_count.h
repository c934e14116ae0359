#pragma once
// MPI counts are ints: a larger message is an error naming its size, never a silent wrap.
#include <climits>
#include <cstddef>
#include <string>

#include "common/error.h"

namespace tpbatch {

inline int mpi_count(size_t n) {
  if (n > static_cast<size_t>(INT_MAX)) throw Error("MPI message of " + std::to_string(n) + " elements is too large");
  return static_cast<int>(n);
}

}  // namespace tpbatch
