#include "topology/topology.h"

#include <cstdlib>
#include <vector>

#include "common/error.h"

namespace tpbatch {

std::string Topology::describe() const {
  return "world " + std::to_string(layout.world_size) + " = data " + std::to_string(layout.data()) + " x pipeline " +
         std::to_string(layout.pipeline) + " x tensor " + std::to_string(layout.tensor) + " on " +
         std::to_string(node_count) + " node(s)";
}

Topology build_topology(const ParallelSpec& parallel, const ModelConfig& config) {
  Topology t;
  MPI_Comm_rank(MPI_COMM_WORLD, &t.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &t.layout.world_size);
  t.layout.tensor = static_cast<int>(parallel.tensor);
  t.layout.pipeline = static_cast<int>(parallel.pipeline);

  // Node membership: emulated (every N ranks) or what MPI reports.
  int64_t per_node = parallel.ranks_per_node;
  if (const char* env = std::getenv("TPBATCH_RANKS_PER_NODE"); env && std::atoi(env) > 0) per_node = std::atoi(env);
  int node_id = 0;  // lowest world rank on the node
  if (per_node > 0) {
    node_id = static_cast<int>(t.world_rank / per_node * per_node);
    t.local_rank = static_cast<int>(t.world_rank % per_node);
  } else {
    MPI_Comm node_comm;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, t.world_rank, MPI_INFO_NULL, &node_comm);
    MPI_Comm_rank(node_comm, &t.local_rank);
    MPI_Allreduce(&t.world_rank, &node_id, 1, MPI_INT, MPI_MIN, node_comm);
    MPI_Comm_free(&node_comm);
  }
  std::vector<int> node_of(t.layout.world_size);
  MPI_Allgather(&node_id, 1, MPI_INT, node_of.data(), 1, MPI_INT, MPI_COMM_WORLD);
  t.node_count = 0;
  t.local_size = 0;
  for (int r = 0; r < t.layout.world_size; ++r) {
    if (node_of[r] == r) {  // r leads a node
      if (r < node_id) ++t.node_index;
      ++t.node_count;
    }
    if (node_of[r] == node_id) ++t.local_size;
  }

  // Validity: identical on every rank, since every input to it is.
  std::string problem = layout_problem(t.layout, config);
  if (problem.empty()) {
    for (int r = 0; r < t.layout.world_size; ++r) {
      int leader = r - r % t.layout.tensor;
      if (node_of[r] != node_of[leader]) {
        problem = "the tensor-parallel group of ranks " + std::to_string(leader) + ".." +
                  std::to_string(leader + t.layout.tensor - 1) + " would cross a node boundary (rank " +
                  std::to_string(r) + " is on another node); parallel.tensor must divide the ranks per node";
        break;
      }
    }
  }
  if (!problem.empty()) throw JobError("impossible layout: " + problem);

  t.coords = coords_of(t.layout, t.world_rank);
  const RankCoords& c = t.coords;
  MPI_Comm tp, pp, replica;
  MPI_Comm_split(MPI_COMM_WORLD, c.dp * t.layout.pipeline + c.pp, c.tp, &tp);
  MPI_Comm_split(MPI_COMM_WORLD, c.dp * t.layout.tensor + c.tp, c.pp, &pp);
  MPI_Comm_split(MPI_COMM_WORLD, c.dp, c.pp * t.layout.tensor + c.tp, &replica);
  t.tp = std::make_unique<MpiGroup>(tp);
  t.pp = std::make_unique<MpiGroup>(pp);
  t.replica = std::make_unique<MpiGroup>(replica);
  return t;
}

}  // namespace tpbatch
