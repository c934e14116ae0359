#include "topology/mpi_group.h"

namespace tpbatch {

MpiGroup::MpiGroup(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiGroup::~MpiGroup() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (owned_ && !finalized && comm_ != MPI_COMM_WORLD && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

}  // namespace tpbatch
