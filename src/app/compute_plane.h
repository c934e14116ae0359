#pragma once
// The backend and the data-plane communicators of this rank, chosen in one place: `device: auto`
// is CUDA when every rank sees a GPU, else the CPU; the start-up log says which and why.
#include <memory>
#include <string>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "job/job_spec.h"
#include "topology/topology.h"

namespace tpbatch {

// Teardown order matters on CUDA: a communicator's destructor waits on the backend's stream and
// unregisters from the backend, so the communicators must go before the backend. Members are
// destroyed in reverse order, so the backend is declared first. Member-wise move assignment would
// do the opposite (it replaces `backend` first, freeing it under the live communicators), so it is
// deleted: hold a plane in a std::optional and end it with reset().
struct ComputePlane {
  std::unique_ptr<Backend> backend;   // first: outlives the communicators below
  std::unique_ptr<Communicator> tp;   // the TP group's tensor collectives
  std::unique_ptr<Communicator> pp;   // hidden states between pipeline neighbours
  std::string reason;                 // why this backend, for the log
  int device = -1;                    // the GPU, on CUDA

  ComputePlane() = default;
  ComputePlane(ComputePlane&&) = default;
  ComputePlane& operator=(ComputePlane&&) = delete;
};

// Collective over MPI_COMM_WORLD (every rank agrees on the backend). Throws JobError when the job
// asks for what cannot be had (device: cuda without a GPU on every rank).
ComputePlane make_compute_plane(const JobSpec& job, const Topology& topo);

}  // namespace tpbatch
