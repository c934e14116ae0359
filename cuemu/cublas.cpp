// The cuBLAS stand-in: the handle API and cublasGemmEx, queued on the handle's stream and
// computed by reference_gemm (gemm_reference.h). It checks what real cuBLAS documents instead of
// computing garbage: leading dimensions, the (compute type, A/B/C type) table, and that every
// operand's extent lies inside one device allocation.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "gemm_reference.h"
#include "host_state.h"


struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasPointerMode_t pointer_mode = CUBLAS_POINTER_MODE_HOST;
};

namespace {

size_t type_size(cudaDataType t) {
  switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_16F:
    case CUDA_R_16BF: return 2;
    default: return 0;
  }
}
// cublasGemmEx's table of supported (compute, A/B, C) types, for the real types emulated here.
bool supported(cublasComputeType_t c, cudaDataType ab, cudaDataType out) {
  switch (c) {
    case CUBLAS_COMPUTE_32F:
    case CUBLAS_COMPUTE_32F_PEDANTIC:
      return (ab == CUDA_R_16BF && (out == CUDA_R_16BF || out == CUDA_R_32F)) ||
             (ab == CUDA_R_16F && (out == CUDA_R_16F || out == CUDA_R_32F)) || (ab == CUDA_R_32F && out == CUDA_R_32F);
    case CUBLAS_COMPUTE_32F_FAST_TF32:
    case CUBLAS_COMPUTE_32F_FAST_16F:
    case CUBLAS_COMPUTE_32F_FAST_16BF: return ab == CUDA_R_32F && out == CUDA_R_32F;
    default: return false;
  }
}

cublasStatus_t fail(cublasStatus_t s, const char* msg, const std::string& detail = "") {
  std::fprintf(stderr, "cuemu cuBLAS: cublasGemmEx: %s%s%s\n", msg, detail.empty() ? "" : ": ", detail.c_str());
  return s;
}

}  // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream_v2(cublasHandle_t handle, cudaStream_t* stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t handle, cublasPointerMode_t mode) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->pointer_mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}
const char* cublasGetStatusName(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    default: return "CUBLAS_STATUS_(other)";
  }
}
const char* cublasGetStatusString(cublasStatus_t s) { return cublasGetStatusName(s); }

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t /*algo*/) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (m < 0 || n < 0 || k < 0) return fail(CUBLAS_STATUS_INVALID_VALUE, "negative m, n or k");
  for (cublasOperation_t t : {transa, transb})
    if (t != CUBLAS_OP_N && t != CUBLAS_OP_T && t != CUBLAS_OP_C) return fail(CUBLAS_STATUS_INVALID_VALUE, "bad op");
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  const int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
  char buf[256];
  if (lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m)) {
    std::snprintf(buf, sizeof buf, "m=%d n=%d k=%d trans=%d%d lda=%d (>= %d) ldb=%d (>= %d) ldc=%d (>= %d)", m, n, k,
                  ta, tb, lda, std::max(1, a_rows), ldb, std::max(1, b_rows), ldc, std::max(1, m));
    return fail(CUBLAS_STATUS_INVALID_VALUE, "leading dimension too small", buf);
  }
  if (Atype != Btype || !supported(computeType, Atype, Ctype)) {
    std::snprintf(buf, sizeof buf, "compute %d A %d B %d C %d", int(computeType), int(Atype), int(Btype), int(Ctype));
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "type combination not in cublasGemmEx's table", buf);
  }
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  auto extent = [](int rows, int cols, int ld) { return size_t(ld) * size_t(cols - 1) + size_t(rows); };
  std::string why;
  if (k > 0 && !cuemu::device_range(A, extent(a_rows, a_cols, lda) * type_size(Atype), &why))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "A outside device memory", why);
  if (k > 0 && !cuemu::device_range(B, extent(b_rows, b_cols, ldb) * type_size(Btype), &why))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "B outside device memory", why);
  if (!cuemu::device_range(C, extent(m, n, ldc) * type_size(Ctype), &why))
    return fail(CUBLAS_STATUS_INVALID_VALUE, "C outside device memory", why);
  if (handle->pointer_mode != CUBLAS_POINTER_MODE_HOST)
    return fail(CUBLAS_STATUS_NOT_SUPPORTED, "device pointer mode is not emulated");
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);  // read at the call
  const bool tf32 = computeType == CUBLAS_COMPUTE_32F_FAST_TF32;
  std::snprintf(buf, sizeof buf, "cublasGemmEx m=%d n=%d k=%d", m, n, k);
  const bool ok = cuemu::enqueue_on(handle->stream, buf, [=] {
    cuemu::reference_gemm(ta, tb, m, n, k, al, A, Atype, lda, B, Btype, ldb, be, C, Ctype, ldc, tf32);
  });
  return ok ? CUBLAS_STATUS_SUCCESS : fail(CUBLAS_STATUS_EXECUTION_FAILED, "invalid stream");
}

}  // extern "C"
