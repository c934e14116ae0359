#pragma once
// CUDA/cuBLAS/NCCL status checks that throw tpbatch::Error naming the call and the failure.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "common/error.h"

namespace tpbatch {

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}
inline void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusString(s));
}

}  // namespace tpbatch

#define TPBATCH_CUDA_CHECK(call) ::tpbatch::cuda_check((call), #call)
#define TPBATCH_CUBLAS_CHECK(call) ::tpbatch::cublas_check((call), #call)
// After a kernel launch: launch-configuration errors surface here, execution errors at the next sync.
#define TPBATCH_CUDA_LAUNCHED(name) ::tpbatch::cuda_check(cudaGetLastError(), name)
