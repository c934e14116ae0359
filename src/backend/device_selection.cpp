#include "backend/device_selection.h"

#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace tpbatch {

int device_for_local_rank(int local_rank, int visible_devices) {
  if (visible_devices <= 0) throw Error("no CUDA device visible to this rank (check CUDA_VISIBLE_DEVICES)");
  if (local_rank < 0) throw Error("negative node-local rank " + std::to_string(local_rank));
  return local_rank % visible_devices;
}

void check_tp_group_gpus(const std::vector<RankGpu>& group, bool allow_shared) {
  if (allow_shared) return;
  for (size_t a = 0; a < group.size(); ++a)
    for (size_t b = a + 1; b < group.size(); ++b)
      if (group[a].node == group[b].node && group[a].device == group[b].device)
        throw Error("TP ranks " + std::to_string(a) + " and " + std::to_string(b) + " of one tensor-parallel group "
                    "both drive GPU " + std::to_string(group[a].device) + " of node " + std::to_string(group[a].node) +
                    ": a TP group needs one GPU per rank (start fewer ranks per node, or make more GPUs visible; "
                    "TPBATCH_ALLOW_SHARED_GPU=1 allows it for tests, with NCCL_HOSTID set per rank)");
}

bool shared_gpu_allowed_by_env() {
  const char* v = std::getenv("TPBATCH_ALLOW_SHARED_GPU");
  return v && std::strcmp(v, "1") == 0;
}

std::vector<RankGpu> gather_group_gpus(MPI_Comm group, int node, int device) {
  int size = 1;
  MPI_Comm_size(group, &size);
  const int mine[2] = {node, device};
  std::vector<int> all(2 * static_cast<size_t>(size));
  MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, group);
  std::vector<RankGpu> out(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) out[r] = {all[2 * r], all[2 * r + 1]};
  return out;
}

BackendKind choose_backend(std::optional<BackendKind> requested, bool every_rank_has_gpu) {
  if (!requested) return every_rank_has_gpu ? BackendKind::kCuda : BackendKind::kCpu;
  if (*requested == BackendKind::kCuda && !every_rank_has_gpu)
    throw JobError("device: cuda requested but not every rank has a CUDA GPU (use device: auto or cpu)");
  return *requested;
}

int graph_bucket(int batch) {
  if (batch <= 1) return 1;
  if (batch <= 2) return 2;
  if (batch <= 4) return 4;
  if (batch > kMaxGraphBatch) return 0;
  return (batch + 7) / 8 * 8;
}

}  // namespace tpbatch
