// cuBLAS and NCCL, opened the first time the CUDA backend calls them rather than when tpbatch
// starts. Linked as usual, every tpbatch process would map and relocate them (about 800 MB of
// libraries: 0.1 s and 200 MB of touched pages per process, on a CPU run and on each rank of one
// alike), and a machine without them (a login node, a CPU partition) could not start tpbatch at
// all. Each function the backend calls is defined here with the library's own prototype (from its
// header, so a changed signature fails to compile) and forwards to the library's through dlsym.
// The CUDA runtime itself is linked statically (cudart_static), which opens the driver the same
// way. Built only with the real CUDA backend: the emulated device defines these functions itself.
#include <cublas_v2.h>
#include <dlfcn.h>
#include <nccl.h>

#include <mutex>
#include <string>

#include "common/error.h"

#define TPBATCH_STR2(x) #x
#define TPBATCH_STR(x) TPBATCH_STR2(x)

namespace {

struct Library {
  const char* soname;
  const char* built_against;  // the path the build found it at: the fallback when the loader's search does not
  std::once_flag once;
  void* handle = nullptr;
  std::string error;
};

Library& cublas() {
  static Library lib{"libcublas.so." TPBATCH_STR(CUBLAS_VER_MAJOR), TPBATCH_CUBLAS_PATH, {}, nullptr, {}};
  return lib;
}

Library& nccl() {
  static Library lib{"libnccl.so." TPBATCH_STR(NCCL_MAJOR), TPBATCH_NCCL_PATH, {}, nullptr, {}};
  return lib;
}

void* open(Library& lib) {
  std::call_once(lib.once, [&lib] {
    lib.handle = dlopen(lib.soname, RTLD_NOW | RTLD_LOCAL);
    if (lib.handle) return;
    lib.error = dlerror();
    if (*lib.built_against) lib.handle = dlopen(lib.built_against, RTLD_NOW | RTLD_LOCAL);
  });
  if (!lib.handle)
    throw tpbatch::Error(std::string("the CUDA backend needs ") + lib.soname + ", which cannot be loaded (" +
                         lib.error + "); install it or add its folder to LD_LIBRARY_PATH");
  return lib.handle;
}

template <class Fn>
Fn symbol(Library& lib, const char* name) {
  void* handle = open(lib);
  void* f = dlsym(handle, name);
  if (!f) throw tpbatch::Error(std::string(lib.soname) + " has no " + name + " (a different version than tpbatch was built with?)");
  return reinterpret_cast<Fn>(f);
}

}  // namespace

// Each: look the function up once, then call it.
#define TPBATCH_FORWARD(LIB, RET, NAME, PARAMS, ARGS)                                  \
  extern "C" RET NAME PARAMS {                                                         \
    using Fn = RET(*) PARAMS;                                                          \
    static const Fn real = symbol<Fn>(LIB(), #NAME);                                   \
    return real ARGS;                                                                  \
  }

TPBATCH_FORWARD(cublas, cublasStatus_t, cublasCreate_v2, (cublasHandle_t * handle), (handle))
TPBATCH_FORWARD(cublas, cublasStatus_t, cublasDestroy_v2, (cublasHandle_t handle), (handle))
TPBATCH_FORWARD(cublas, cublasStatus_t, cublasSetStream_v2, (cublasHandle_t handle, cudaStream_t stream),
                (handle, stream))
TPBATCH_FORWARD(cublas, const char*, cublasGetStatusString, (cublasStatus_t status), (status))
TPBATCH_FORWARD(cublas, cublasStatus_t, cublasGemmEx,
                (cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n, int k,
                 const void* alpha, const void* A, cudaDataType Atype, int lda, const void* B, cudaDataType Btype,
                 int ldb, const void* beta, void* C, cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                 cublasGemmAlgo_t algo),
                (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C, Ctype, ldc,
                 computeType, algo))

TPBATCH_FORWARD(nccl, ncclResult_t, ncclGetVersion, (int* version), (version))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclGetUniqueId, (ncclUniqueId * id), (id))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId id, int rank),
                (comm, nranks, id, rank))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclCommDestroy, (ncclComm_t comm), (comm))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclCommAbort, (ncclComm_t comm), (comm))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* error), (comm, error))
TPBATCH_FORWARD(nccl, const char*, ncclGetErrorString, (ncclResult_t result), (result))
TPBATCH_FORWARD(nccl, const char*, ncclGetLastError, (ncclComm_t comm), (comm))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclGroupStart, (), ())
TPBATCH_FORWARD(nccl, ncclResult_t, ncclGroupEnd, (), ())
TPBATCH_FORWARD(nccl, ncclResult_t, ncclAllReduce,
                (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                 ncclComm_t comm, cudaStream_t stream),
                (sendbuff, recvbuff, count, datatype, op, comm, stream))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclAllGather,
                (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm,
                 cudaStream_t stream),
                (sendbuff, recvbuff, sendcount, datatype, comm, stream))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclSend,
                (const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                 cudaStream_t stream),
                (sendbuff, count, datatype, peer, comm, stream))
TPBATCH_FORWARD(nccl, ncclResult_t, ncclRecv,
                (void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                 cudaStream_t stream),
                (recvbuff, count, datatype, peer, comm, stream))
