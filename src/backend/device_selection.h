#pragma once
// Device and algorithm choices for the CUDA backend that need no GPU to decide, so they are
// compiled in every build and unit-tested on CPU machines (tests/unit/test_device_selection.cpp).
#include <mpi.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace tpbatch {

// The GPU a rank drives: its node-local rank modulo the devices it sees (ranks share GPUs when
// there are more ranks than devices). Throws Error when no device is visible or local_rank < 0.
int device_for_local_rank(int local_rank, int visible_devices);

// The GPU one rank drives: the node it runs on and the device index there.
struct RankGpu {
  int node = 0;
  int device = 0;
};
// Throws Error when two ranks of one TP group (given in TP-rank order) drive the same GPU of the
// same node, naming both ranks and the GPU: NCCL refuses such a communicator, and sharing would
// halve each rank's memory. allow_shared skips the check (TPBATCH_ALLOW_SHARED_GPU=1: tests of
// several ranks on one GPU, each with its own NCCL_HOSTID).
void check_tp_group_gpus(const std::vector<RankGpu>& group, bool allow_shared);
// Whether the environment sets TPBATCH_ALLOW_SHARED_GPU=1.
bool shared_gpu_allowed_by_env();
// Collective over `group`: every rank's (node, device), in the group's rank order (the input of
// check_tp_group_gpus).
std::vector<RankGpu> gather_group_gpus(MPI_Comm group, int node, int device);

enum class BackendKind { kCpu, kCuda };
// The backend for a job's `device:` setting, given as the backend it asks for (none: auto): cpu ->
// cpu; cuda -> cuda when every rank has a GPU, else a JobError naming the problem; auto -> cuda
// only when every rank has a GPU.
BackendKind choose_backend(std::optional<BackendKind> requested, bool every_rank_has_gpu);

// CUDA-graph batch buckets, as vLLM captures them: 1, 2, 4, 8, 16, 24, ..., 256. Returns the
// smallest bucket >= batch (1 for batch <= 1), 0 when batch is above the largest (run eagerly).
int graph_bucket(int batch);
inline constexpr int kMaxGraphBatch = 256;

}  // namespace tpbatch
