#pragma once
// This rank's place in the job: its (dp, pp, tp) coordinates, its node, and the MPI
// sub-communicators of its tensor-parallel group, pipeline and replica.
#include <memory>
#include <string>

#include "job/job_spec.h"
#include "model/config.h"
#include "topology/layout.h"
#include "topology/mpi_group.h"

namespace tpbatch {

struct Topology {
  Layout layout;
  RankCoords coords;
  int world_rank = 0;
  int node_index = 0;       // which node this rank is on (0-based, in rank order)
  int node_count = 1;
  int local_rank = 0;       // rank on its node: picks the device
  int local_size = 1;
  std::unique_ptr<MpiGroup> tp;        // ranks of this TP group
  std::unique_ptr<MpiGroup> pp;        // ranks of this pipeline (same dp, same tp)
  std::unique_ptr<MpiGroup> replica;   // every rank of this replica (same dp)

  bool is_replica_leader() const { return coords.tp == 0 && coords.pp == 0; }
  std::string describe() const;
};

// Collective over MPI_COMM_WORLD. Nodes come from MPI_COMM_TYPE_SHARED, or every N consecutive
// ranks when parallel.ranks_per_node (or env TPBATCH_RANKS_PER_NODE) is N > 0. Throws JobError
// (exit 2) on every rank alike when the layout is impossible (including a TP group crossing nodes).
Topology build_topology(const ParallelSpec& parallel, const ModelConfig& config);

}  // namespace tpbatch
