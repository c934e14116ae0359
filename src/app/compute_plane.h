#pragma once
// The backend and the data-plane communicators of this rank, chosen in one place: `device: auto`
// is CUDA when every rank sees a GPU, else the CPU; the start-up log says which and why.
#include <memory>
#include <string>

#include "backend/backend.h"
#include "job/job_spec.h"
#include "topology/communicator.h"
#include "topology/topology.h"

namespace tpbatch {

struct ComputePlane {
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Communicator> tp;   // the TP group's tensor collectives
  std::unique_ptr<Communicator> pp;   // hidden states between pipeline neighbours
  std::string reason;                 // why this backend, for the log
  int device = -1;                    // the GPU, on CUDA
};

// Collective over MPI_COMM_WORLD (every rank agrees on the backend). Throws JobError when the job
// asks for what cannot be had (device: cuda without a GPU on every rank).
ComputePlane make_compute_plane(const JobSpec& job, const Topology& topo);

// The KV cache dtype for engine.kv_cache_dtype on this backend.
DType kv_cache_dtype(const JobSpec& job, const Backend& backend);

}  // namespace tpbatch
