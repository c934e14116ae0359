#include "app/compute_plane.h"

#include <mpi.h>

#include <optional>

#include "backend/device_selection.h"
#include "comm/mpi_tensor_communicator.h"
#include "common/error.h"
#include "model/llama_shard.h"
#ifdef TPBATCH_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace tpbatch {
namespace {

// The backend `device:` asks for; none for auto (choose_backend decides).
std::optional<BackendKind> requested_backend(Device device) {
  switch (device) {
    case Device::kCpu: return BackendKind::kCpu;
    case Device::kCuda: return BackendKind::kCuda;
    case Device::kAuto: break;
  }
  return std::nullopt;
}

}  // namespace

ComputePlane make_compute_plane(const JobSpec& job, const Topology& topo) {
  ComputePlane plane;
  int mine = 0;
#ifdef TPBATCH_HAVE_CUDA
  if (job.device != Device::kCpu) mine = cuda_device_count();
#ifdef TPBATCH_CUDA_EMULATED
  // The emulated device (cuemu/) exists to test the CUDA path: only `device: cuda` gets it.
  if (job.device == Device::kAuto) mine = 0;
#endif
#endif
  int fewest = 0;
  MPI_Allreduce(&mine, &fewest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const bool every_rank_has_gpu = fewest > 0;
#ifndef TPBATCH_HAVE_CUDA
  if (job.device == Device::kCuda) throw JobError("device: cuda requested but this tpbatch was built without the CUDA backend");
#endif
  if (choose_backend(requested_backend(job.device), every_rank_has_gpu) == BackendKind::kCuda) {
#ifdef TPBATCH_HAVE_CUDA
    plane.device = device_for_local_rank(topo.local_rank, mine);
    // Two ranks of one TP group on one GPU: NCCL refuses it, and each would get half the memory. By
    // bus id: ranks that each see only their own GPU (--gpus-per-task=1) all call it device 0.
    const std::string bus_id = cuda_device_bus_id(plane.device);
    check_tp_group_gpus(gather_group_gpus(topo.tp->comm(), topo.node_index, plane.device, bus_id),
                        shared_gpu_allowed_by_env());
    plane.backend = make_cuda_backend(plane.device);
    plane.tp = make_nccl_communicator(topo.tp->comm(), *plane.backend);
    plane.pp = make_nccl_communicator(topo.pp->comm(), *plane.backend);
    plane.reason = std::string("device: ") + (job.device == Device::kCuda ? "cuda" : "auto") +
                   ", every rank sees a GPU (rank 0 on GPU " + std::to_string(plane.device) + "); NCCL in the TP groups";
#ifdef TPBATCH_CUDA_EMULATED
    plane.reason += "; EMULATED device (a test build: correct, not fast)";
#endif
#endif
    return plane;
  }
  plane.backend = make_cpu_backend();
  plane.tp = std::make_unique<MpiTensorCommunicator>(topo.tp->comm(), *plane.backend);
  plane.pp = std::make_unique<MpiTensorCommunicator>(topo.pp->comm(), *plane.backend);
  if (job.device == Device::kCpu)
    plane.reason = "device: cpu";
#ifdef TPBATCH_CUDA_EMULATED
  else
    plane.reason = "device: auto, and this build's CUDA device is emulated (only device: cuda uses it)";
#elif defined(TPBATCH_HAVE_CUDA)
  else
    plane.reason = "device: auto, and not every rank sees a CUDA GPU";
#else
  else
    plane.reason = "device: auto, built without the CUDA backend";
#endif
  return plane;
}

}  // namespace tpbatch
