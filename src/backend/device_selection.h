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

// The GPU one rank drives: the node it runs on, the device index it sees, and the GPU's PCI bus id
// ("0000:41:00.0"; "" when unknown). The index alone does not name a GPU: with --gpus-per-task=1
// (or CUDA_VISIBLE_DEVICES set per rank) every rank sees its own GPU as device 0.
struct RankGpu {
  int node = 0;
  int device = 0;
  std::string bus_id = "";
};
// Whether a and b are one physical GPU: the same node and the same PCI bus id (what NCCL compares
// when it refuses a communicator with a GPU twice), or the same device index where a bus id is unknown.
bool same_gpu(const RankGpu& a, const RankGpu& b);
// Throws Error when two ranks of one TP group (given in TP-rank order) drive the same GPU (same_gpu),
// naming both ranks and the GPU: NCCL refuses such a communicator, and sharing would halve each
// rank's memory. allow_shared skips the check (TPBATCH_ALLOW_SHARED_GPU=1: tests of several ranks
// on one GPU, each with its own NCCL_HOSTID).
void check_tp_group_gpus(const std::vector<RankGpu>& group, bool allow_shared);
// Whether the environment sets TPBATCH_ALLOW_SHARED_GPU=1.
bool shared_gpu_allowed_by_env();
// Collective over `group`: every rank's (node, device, bus id), in the group's rank order (the
// input of check_tp_group_gpus). A bus id is at most kMaxBusIdLength bytes (PCI ids are 12-16).
std::vector<RankGpu> gather_group_gpus(MPI_Comm group, int node, int device, const std::string& bus_id = "");
inline constexpr size_t kMaxBusIdLength = 63;

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
