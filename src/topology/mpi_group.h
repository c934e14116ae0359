#pragma once
// One MPI communicator of this rank's groups (its TP group, pipeline, replica), owned: freed on
// destruction unless it is MPI_COMM_WORLD. Messages over it take a ControlChannel (host memory)
// or a data-plane Communicator (tensors); both live in src/comm/.
#include <mpi.h>

namespace tpbatch {

class MpiGroup {
 public:
  explicit MpiGroup(MPI_Comm comm, bool owned = true);
  ~MpiGroup();
  MpiGroup(const MpiGroup&) = delete;
  MpiGroup& operator=(const MpiGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  MPI_Comm comm() const { return comm_; }

 private:
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace tpbatch
