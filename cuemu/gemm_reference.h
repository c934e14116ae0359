#pragma once
// The product the cuBLAS stand-in computes, as a plain host function (no device, no handle), so
// that a test on a real GPU can hold cuBLAS to the same operands (tests/gpu/): column-major
//   C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C   (op: transposed when ta / tb),
// every product accumulated in double, then alpha and beta in float, then C's round-to-nearest-even.
// tf32: A and B rounded to TF32 first (cvt.rna.tf32.f32), as CUBLAS_COMPUTE_32F_FAST_TF32's tensor
// cores do. beta == 0 never reads C. Types: CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF.
#include <library_types.h>

namespace cuemu {

void reference_gemm(bool ta, bool tb, int m, int n, int k, float alpha, const void* A, cudaDataType a_type, int lda,
                    const void* B, cudaDataType b_type, int ldb, float beta, void* C, cudaDataType c_type, int ldc,
                    bool tf32);

}  // namespace cuemu
