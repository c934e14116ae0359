// Collectives on the emulated device between the ranks of `mpirun -np 2`, right and wrong, for
// tests/emu/nccl_planted_bugs.sh: nccl_probe CASE exits 0 when the case's program completes.
//   allreduce            both ranks sum 1000 floats: each must see 1 + 2
//   counts_differ        rank 1 sums 999 floats (the emulator must stop it: NCCL would hang or corrupt)
//   both_send_first      both ranks send before receiving (a deadlock on a GPU; the emulator says so)
//   mpi_waits_on_nccl    rank 0 queues a send, then blocks in MPI until rank 1 has received it (needs
//                        device work to progress while the host waits: threaded streams)
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "nccl_probe: %s\n", what);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string which = argc > 1 ? argv[1] : "";
  if (size != 2) return fail("run under mpirun -np 2");
  cudaSetDevice(rank);
  cudaStream_t stream;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  ncclUniqueId id;
  if (rank == 0) ncclGetUniqueId(&id);
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t comm;
  if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return fail("ncclCommInitRank");
  constexpr size_t n = 1000;
  float *a = nullptr, *b = nullptr;
  cudaMalloc(&a, n * sizeof(float));
  cudaMalloc(&b, n * sizeof(float));
  std::vector<float> host(n, static_cast<float>(rank + 1));
  cudaMemcpy(a, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  int rc = 0;
  if (which == "allreduce" || which == "counts_differ") {
    const size_t count = which == "counts_differ" && rank == 1 ? n - 1 : n;
    ncclAllReduce(a, a, count, ncclFloat32, ncclSum, comm, stream);
    cudaStreamSynchronize(stream);
    cudaMemcpy(host.data(), a, n * sizeof(float), cudaMemcpyDeviceToHost);
    if (host[0] != 3.0f || host[n - 1] != 3.0f) rc = fail("allreduce: wrong sum");
  } else if (which == "both_send_first") {
    ncclSend(a, n, ncclFloat32, 1 - rank, comm, stream);
    ncclRecv(b, n, ncclFloat32, 1 - rank, comm, stream);
    cudaStreamSynchronize(stream);
  } else if (which == "mpi_waits_on_nccl") {
    int token = 0;
    if (rank == 0) {
      ncclSend(a, n, ncclFloat32, 1, comm, stream);
      MPI_Recv(&token, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);  // until rank 1 has the data
      cudaStreamSynchronize(stream);
    } else {
      ncclRecv(b, n, ncclFloat32, 0, comm, stream);
      cudaStreamSynchronize(stream);
      cudaMemcpy(host.data(), b, n * sizeof(float), cudaMemcpyDeviceToHost);
      if (host[0] != 1.0f) rc = fail("recv: wrong data");
      MPI_Send(&token, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    }
  } else {
    rc = fail("unknown case");
  }
  ncclCommDestroy(comm);
  cudaFree(a);
  cudaFree(b);
  cudaStreamDestroy(stream);
  MPI_Finalize();
  return rc;
}
