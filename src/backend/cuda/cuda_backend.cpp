// The CUDA backend's lifetime, its host waits and the device queries: cuBLAS GEMMs (bf16/fp16
// with fp32 accumulation, TF32 for fp32 weights) for matmul_nt, kernels/ for everything else, all
// on one stream. Same contract as the CPU backend (the reference, src/backend/cpu/), which
// tests/gpu/test_cuda_kernels.cpp compares it with. Memory: cuda_memory.cpp; the step's tables
// and attention: cuda_step.cpp; the other operations: cuda_ops.cpp.
#include <nccl.h>

#include <cstdio>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "reliability/watchdog.h"

namespace tpbatch {

CudaBackend::CudaBackend(int device) : device_(device) {
  TPBATCH_CUDA_CHECK(cudaSetDevice(device));
  TPBATCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
  // Non-blocking: never implicitly ordered with the legacy default stream (other libraries' work).
  TPBATCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TPBATCH_CUBLAS_CHECK(cublasCreate(&cublas_));
  TPBATCH_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  TPBATCH_CUDA_CHECK(cudaEventCreateWithFlags(&wait_event_, cudaEventDisableTiming));
  for (int i = 0; i < 2; ++i) {
    TPBATCH_CUDA_CHECK(cudaEventCreateWithFlags(&step_copied_[i], cudaEventDisableTiming));
    TPBATCH_CUDA_CHECK(cudaEventCreateWithFlags(&upload_copied_[i], cudaEventDisableTiming));
  }
}

CudaBackend::~CudaBackend() {
  // After an abort the stream may hold work that never ends: leave everything to the exit. So
  // also when the last wait fails (it marks the backend aborted); a destructor throws nothing.
  if (aborted_) return;
  try {
    wait_stream("CUDA backend teardown");
  } catch (const std::exception& e) {
    mark_aborted(e.what());
    log_info("CUDA backend teardown on device %d: %s; its memory is left to the process exit",
                 device_, e.what());
    return;
  }
  for (Scratch* s : {&step_device_, &attention_scratch_, &logit_scratch_, &gemm_x_, &gemm_y_, &moe_device_,
                     &draw_device_, &draw_sort_})
    cudaFree(s->data);
  cudaFreeHost(moe_pinned_);
  cudaFreeHost(draw_pinned_);
  if (moe_copied_) cudaEventDestroy(moe_copied_);
  for (int i = 0; i < 2; ++i) {
    cudaFreeHost(step_pinned_[i]);
    cudaFreeHost(upload_pinned_[i]);
    cudaEventDestroy(step_copied_[i]);
    cudaEventDestroy(upload_copied_[i]);
  }
  cudaFreeHost(stage_);
  cudaEventDestroy(wait_event_);
  cublasDestroy(cublas_);
  cudaStreamDestroy(stream_);
}

// ---- waits ------------------------------------------------------------------------------------

void CudaBackend::add_error_source(AsyncErrorSource* source) { sources_.push_back(source); }
void CudaBackend::remove_error_source(AsyncErrorSource* source) { std::erase(sources_, source); }

void CudaBackend::mark_aborted(const std::string& why) noexcept {
  bool expected = false;
  if (!aborted_.compare_exchange_strong(expected, true)) return;  // the first reason is the one to report
  try {
    abort_reason_ = why;
  } catch (...) {  // out of memory for the message: the flag alone still stops waits and frees
  }
}

void CudaBackend::wait_event(cudaEvent_t event, const char* what) {
  if (aborted_) throw Error(std::string(what) + ": the CUDA backend was aborted earlier: " + abort_reason_);
  WatchedCall watched(what);
  if (sources_.empty()) {
    TPBATCH_CUDA_CHECK(cudaEventSynchronize(event));
    return;
  }
  try {
    wait_watching(
        [&] {
          const cudaError_t e = cudaEventQuery(event);
          if (e == cudaErrorNotReady) return false;
          cuda_check(e, what);
          return true;
        },
        sources_, what);
  } catch (const std::exception& e) {
    mark_aborted(e.what());  // conservatively: the error may have come from an aborted communicator too
    throw;
  }
}

void CudaBackend::wait_stream(const char* what) {
  TPBATCH_CUDA_CHECK(cudaEventRecord(wait_event_, stream_));
  wait_event(wait_event_, what);
}

void CudaBackend::synchronize() { wait_stream("CUDA synchronize"); }

// ---- factory and queries ------------------------------------------------------------------------

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the "no driver"/"no device" error
    return 0;
  }
  return n;
}

std::string cuda_device_description(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f", prop.totalGlobalMem / double(size_t(1) << 30));
  return std::string(prop.name) + ", " + gib + " GiB, " + std::to_string(prop.multiProcessorCount) + " SMs";
}

std::string cuda_device_bus_id(int device) {
  char id[64] = {};
  if (cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof id), device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

std::string cuda_build_info() {
  int rt = 0, nccl = 0;
  cudaRuntimeGetVersion(&rt);
  ncclGetVersion(&nccl);
  const int nccl_major = nccl / 10000, nccl_minor = nccl % 10000 / 100, nccl_patch = nccl % 100;
  return "CUDA runtime " + std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10) + ", NCCL " +
         std::to_string(nccl_major) + "." + std::to_string(nccl_minor) + "." + std::to_string(nccl_patch);
}

}  // namespace tpbatch
