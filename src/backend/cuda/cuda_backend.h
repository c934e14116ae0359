#pragma once
// The CUDA backend and its NCCL data plane, for code that must not see CUDA headers (run_job,
// tests, benchmarks). Built only with -DTPBATCH_CUDA=ON/AUTO (TPBATCH_HAVE_CUDA is then defined).
//
// make_cuda_backend(): Backend on one device (see cuda_backend_impl.h for how each method maps to
// CUDA): bf16 activations and (default) KV cache, cuBLAS GEMMs with fp32 accumulation, kernels/
// for the rest, everything queued on one non-blocking stream of its own. Host waits (download,
// synchronize, host_access) poll the NCCL communicators made on it for asynchronous errors.
#include <mpi.h>

#include <memory>
#include <string>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace tpbatch {

// Backend on CUDA device `device` (cudaSetDevice'd by the constructor). Throws Error on failure.
std::unique_ptr<Backend> make_cuda_backend(int device);

// NCCL communicator over the ranks of `comm` (not owned; it must outlive the result), on
// `cuda_backend`'s stream (a backend from make_cuda_backend, which must outlive the result):
// the first rank's ncclUniqueId goes to the others by MPI_Bcast over `comm`. Collective over
// `comm`. Calls are enqueued on the stream and return without waiting for the device.
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, Backend& cuda_backend);

// Devices visible to this process; 0 when there is no driver or no device (never throws).
int cuda_device_count();
// "NVIDIA H200, 139.8 GiB, 132 SMs" for the start-up log; "" when the device cannot be queried.
std::string cuda_device_description(int device);
// The device's PCI bus id, "0000:41:00.0": which physical GPU it is, whatever index this process
// sees it under. "" when it cannot be queried.
std::string cuda_device_bus_id(int device);
// "CUDA runtime 13.0, NCCL 2.27.7" (no GPU needed).
std::string cuda_build_info();

}  // namespace tpbatch
