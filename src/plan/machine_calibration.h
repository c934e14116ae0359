#pragma once
// `tpbatch plan --calibrate`: measures this machine's rates for the cost model (plan/cost_model.h).
//   read bandwidth   an OpenMP sum over a 256 MiB float buffer (all threads), best of 5
//   GEMM             cpu::gemm_nt fp32 at a large shape (512 x 2048 x 2048: the peak) and at a
//                    decode shape (32 rows x 2048 x 768, weights in cache), giving R_peak and
//                    m_half = 32 x (R_peak / R(32) - 1)
//   allreduce        MPI_Allreduce of float sums, 8 B and 4 MiB, when launched by mpirun with >= 2
//                    ranks: alpha = the 8 B time, B = 2(t-1)/t x S / (t(S) - alpha)
// All values are this process's (the node's, for memory and GEMM: other ranks are idle then).
#include <ostream>
#include <string>

namespace tpbatch {

struct Calibration {
  double memory_gbs = 0.0;
  double gemm_tflops = 0.0;        // large shape
  double gemm_decode_tflops = 0.0; // decode shape
  double gemm_half_rows = 0.0;
  int gemm_threads = 1;
  bool allreduce_measured = false;
  int allreduce_ranks = 0;
  double alpha_us = 0.0;
  double allreduce_gbs = 0.0;
  int mpi_rank = 0;                // the caller prints only on rank 0
};

// The world size mpirun / srun launched this process with (1 when none).
int launched_world_size();

// Measures the allreduce first (all ranks, then MPI_Finalize), then memory and GEMM on rank 0 only
// (the other ranks return at once, with mpi_rank set).
Calibration calibrate_machine(bool measure_memory, bool measure_gemm);

}  // namespace tpbatch
