// Keeps the emulated device honest: real cuBLAS and the emulator's stand-in (cuemu/gemm_reference.h)
// on the same operands, for every (weight, output) type pair the CUDA backend calls cublasGemmEx
// with, in the backend's own row-major y = x w^T form. They may differ only by accumulation order
// (the stand-in sums in double) and the output's rounding: |real - stand-in| <= 2e-5 * sum|x w|
// (k <= 4096 fp32 additions) + one unit in the output's last place. COMPUTE_32F_FAST_TF32 only
// permits TF32: on an H200, cuBLAS 13 computed m = 1 and m = 16 (n = 512, k = 256) in plain fp32
// and m = 7 and m = 64 on TF32 tensor cores, so there the stand-in's TF32 product or its fp32 one
// must match. Runs on a GPU; on the emulated device it would compare the stand-in with itself, and
// skips.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <tuple>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/dtype.h"
#include "gemm_reference.h"

namespace tpbatch {
namespace {

struct Case {
  cudaDataType ab, c;
  cublasComputeType_t compute;
  const char* name;
};

std::vector<uint8_t> host_values(cudaDataType t, size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  const size_t es = t == CUDA_R_32F ? 4 : 2;
  std::vector<uint8_t> out(n * es);
  for (size_t i = 0; i < n; ++i) {
    const float v = u(rng);
    if (t == CUDA_R_32F) {
      std::memcpy(out.data() + 4 * i, &v, 4);
    } else {
      const uint16_t h = t == CUDA_R_16BF ? f32_to_bf16(v) : f32_to_f16(v);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}
float value(cudaDataType t, const std::vector<uint8_t>& b, size_t i) {
  if (t == CUDA_R_32F) {
    float v;
    std::memcpy(&v, b.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return t == CUDA_R_16BF ? bf16_to_f32(h) : f16_to_f32(h);
}
void* device_copy(const std::vector<uint8_t>& b) {
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, b.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, b.data(), b.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

TEST(CublasMatchesTheEmulator, EveryGemmTheBackendMakes) {
#ifdef TPBATCH_CUDA_EMULATED
  GTEST_SKIP() << "on the emulated device the stand-in would be compared with itself";
#endif
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  const std::vector<Case> cases = {
      {CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, "fp32 weights, TF32"},
      {CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F, "bf16 -> bf16"},
      {CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, "bf16 -> fp32 (logits)"},
      {CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F, "fp16 -> fp16"},
      {CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F, "fp16 -> fp32"},
  };
  std::mt19937 rng(7);
  cublasHandle_t h;
  ASSERT_EQ(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
  double worst_overall = 0.0;
  for (const Case& c : cases)
    for (auto [m, n, k] : {std::tuple{1, 512, 256}, std::tuple{7, 300, 1000}, std::tuple{64, 256, 4096}}) {
      const auto x = host_values(c.ab, size_t(m) * k, rng), w = host_values(c.ab, size_t(n) * k, rng);
      const size_t ces = c.c == CUDA_R_32F ? 4 : 2;
      void *dx = device_copy(x), *dw = device_copy(w), *dy = nullptr;
      ASSERT_EQ(cudaMalloc(&dy, size_t(m) * n * ces), cudaSuccess);
      const float one = 1.0f, zero = 0.0f;
      // As CudaBackend::matmul_nt: column-major y^T (n x m) = w (k x n)^T x^T (k x m).
      ASSERT_EQ(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, dw, c.ab, k, dx, c.ab, k, &zero, dy, c.c, n,
                             c.compute, CUBLAS_GEMM_DEFAULT),
                CUBLAS_STATUS_SUCCESS)
          << c.name;
      std::vector<uint8_t> real(size_t(m) * n * ces), ref(real.size()), ref_fp32(real.size());
      ASSERT_EQ(cudaMemcpy(real.data(), dy, real.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      const bool tf32 = c.compute == CUBLAS_COMPUTE_32F_FAST_TF32;
      cuemu::reference_gemm(true, false, n, m, k, 1.0f, w.data(), c.ab, k, x.data(), c.ab, k, 0.0f, ref.data(), c.c, n,
                            tf32);
      if (tf32)  // the plain fp32 product cuBLAS may choose instead
        cuemu::reference_gemm(true, false, n, m, k, 1.0f, w.data(), c.ab, k, x.data(), c.ab, k, 0.0f,
                              ref_fp32.data(), c.c, n, false);
      // The worst |cuBLAS - product| as a fraction of its bound, and where, for one of the products.
      struct Worst { double ratio = 0.0; int i = 0, j = 0; float ref = 0, got = 0; };
      auto worst_against = [&](const std::vector<uint8_t>& product) {
        Worst wst;
        for (int i = 0; i < m; ++i)
          for (int j = 0; j < n; ++j) {
            double mag = 0.0;
            for (int p = 0; p < k; ++p)
              mag += std::fabs(double(value(c.ab, x, size_t(i) * k + p)) * value(c.ab, w, size_t(j) * k + p));
            const float r = value(c.c, product, size_t(i) * n + j), g = value(c.c, real, size_t(i) * n + j);
            const double ulp = c.c == CUDA_R_32F ? std::ldexp(1.0, -23) : c.c == CUDA_R_16BF ? std::ldexp(1.0, -7)
                                                                                             : std::ldexp(1.0, -10);
            const double ratio = std::fabs(double(g) - r) / std::max(2e-5 * mag + ulp * std::fabs(r), 1e-30);
            if (!(ratio <= wst.ratio)) wst = {ratio, i, j, r, g};  // a NaN is the worst
          }
        return wst;
      };
      Worst worst = worst_against(ref);
      if (tf32) {  // the whole call was one kernel: the nearer of the two products it may have computed
        const Worst plain = worst_against(ref_fp32);
        if (plain.ratio < worst.ratio) worst = plain;
      }
      ASSERT_LE(worst.ratio, 1.0) << c.name << " m=" << m << " n=" << n << " k=" << k << " at (" << worst.i << ","
                                  << worst.j << "): cuBLAS " << worst.got << ", stand-in " << worst.ref;
      worst_overall = std::max(worst_overall, worst.ratio);
      cudaFree(dx);
      cudaFree(dw);
      cudaFree(dy);
    }
  cublasDestroy(h);
  RecordProperty("max_rel_err", std::to_string(worst_overall));  // as a fraction of the bound
}

}  // namespace
}  // namespace tpbatch
