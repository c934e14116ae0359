#include "backend/device_selection.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "common/error.h"

namespace tpbatch {

int device_for_local_rank(int local_rank, int visible_devices) {
  if (visible_devices <= 0) throw Error("no CUDA device visible to this rank (check CUDA_VISIBLE_DEVICES)");
  if (local_rank < 0) throw Error("negative node-local rank " + std::to_string(local_rank));
  return local_rank % visible_devices;
}

bool same_gpu(const RankGpu& a, const RankGpu& b) {
  if (a.node != b.node) return false;
  if (!a.bus_id.empty() && !b.bus_id.empty()) return a.bus_id == b.bus_id;
  return a.device == b.device;
}

void check_tp_group_gpus(const std::vector<RankGpu>& group, bool allow_shared) {
  if (allow_shared) return;
  for (size_t a = 0; a < group.size(); ++a)
    for (size_t b = a + 1; b < group.size(); ++b) {
      if (!same_gpu(group[a], group[b])) continue;
      const RankGpu& g = group[a];
      const std::string gpu = g.bus_id.empty() ? std::to_string(g.device)
                                               : g.bus_id + " (device " + std::to_string(g.device) + " to rank " +
                                                     std::to_string(a) + ", " + std::to_string(group[b].device) +
                                                     " to rank " + std::to_string(b) + ")";
      throw Error("TP ranks " + std::to_string(a) + " and " + std::to_string(b) + " of one tensor-parallel group "
                  "both drive GPU " + gpu + " of node " + std::to_string(g.node) +
                  ": a TP group needs one GPU per rank (start fewer ranks per node, or make more GPUs visible; "
                  "TPBATCH_ALLOW_SHARED_GPU=1 allows it for tests, with NCCL_HOSTID set per rank)");
    }
}

bool shared_gpu_allowed_by_env() {
  const char* v = std::getenv("TPBATCH_ALLOW_SHARED_GPU");
  return v && std::strcmp(v, "1") == 0;
}

std::vector<RankGpu> gather_group_gpus(MPI_Comm group, int node, int device, const std::string& bus_id) {
  int size = 1;
  MPI_Comm_size(group, &size);
  // Fixed-size records: two ints, then the bus id NUL-padded.
  constexpr size_t kIdBytes = kMaxBusIdLength + 1;
  constexpr size_t kRecord = 2 * sizeof(int) + kIdBytes;
  std::vector<char> mine(kRecord, '\0'), all(kRecord * static_cast<size_t>(size));
  const int ints[2] = {node, device};
  std::memcpy(mine.data(), ints, sizeof ints);
  std::memcpy(mine.data() + sizeof ints, bus_id.data(), std::min(bus_id.size(), kMaxBusIdLength));
  MPI_Allgather(mine.data(), static_cast<int>(kRecord), MPI_BYTE, all.data(), static_cast<int>(kRecord), MPI_BYTE, group);
  std::vector<RankGpu> out(static_cast<size_t>(size));
  for (size_t r = 0; r < out.size(); ++r) {
    const char* rec = all.data() + r * kRecord;
    int got[2];
    std::memcpy(got, rec, sizeof got);
    out[r] = {got[0], got[1], std::string(rec + sizeof got, strnlen(rec + sizeof got, kIdBytes))};
  }
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
