// GPU micro-benchmark (CUDA builds only; run by scripts/gpu_check.sh on a GPU machine):
//   1. device copy bandwidth (cudaMemcpy D2D, bytes read + written per second);
//   2. decode step of a Llama-3-8B-shaped layer stack (fp32 weights, 32 layers of qkv, o,
//      gate_up and down projections through the CUDA backend's matmul_nt) at batch 1, 8 and 64,
//      against the HBM floor: weight bytes / measured copy bandwidth;
//   3. a prefill-sized GEMM (4096 tokens x 14336 x 4096): fp32 SGEMM through the backend, and
//      cuBLAS with TF32 tensor cores, in TFLOP/s.
// Prints a short table last. Usage: tpbatch_gpu_bench [layers (32)]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backend/cuda/cuda_backend.h"

using namespace tpbatch;
using Clock = std::chrono::steady_clock;

static double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

template <typename F>
static double time_it(F&& f, int iters) {  // mean seconds per call after one warm-up
  f();
  cuda_synchronize();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) f();
  cuda_synchronize();
  return seconds_since(t0) / iters;
}

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  const int layers = argc > 1 ? std::atoi(argv[1]) : 32;
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s, %d SMs, %.1f GiB; %s\n", prop.name, prop.multiProcessorCount,
              prop.totalGlobalMem / double(1 << 30), cuda_build_info().c_str());
  auto be = make_cuda_backend(0);

  // 1. Copy bandwidth.
  const size_t copy_bytes = size_t(2) << 30;
  void* a = cuda_alloc(copy_bytes);
  void* b = cuda_alloc(copy_bytes);
  cuda_memset(a, 1, copy_bytes);
  const double t_copy = time_it([&] { cudaMemcpy(b, a, copy_bytes, cudaMemcpyDeviceToDevice); }, 10);
  const double bw = 2.0 * copy_bytes / t_copy;  // read + write
  std::printf("copy: %.0f GB/s (read+write)\n", bw / 1e9);
  cuda_free(a);
  cuda_free(b);

  // 2. Decode GEMVs over an 8B-shaped stack.
  const int64_t H = 4096, inter = 14336, qkv = 4096 + 2 * 1024;
  struct Proj { int64_t n, k; };
  const std::vector<Proj> projs = {{qkv, H}, {H, H}, {2 * inter, H}, {H, inter}};
  size_t per_layer = 0;
  for (const Proj& p : projs) per_layer += size_t(p.n * p.k);
  const size_t weight_bytes = per_layer * layers * sizeof(float);
  std::vector<float*> w;
  for (int l = 0; l < layers; ++l)
    for (const Proj& p : projs) {
      w.push_back(static_cast<float*>(cuda_alloc(size_t(p.n * p.k) * sizeof(float))));
      cuda_memset(w.back(), 0, size_t(p.n * p.k) * sizeof(float));
    }
  const int64_t max_batch = 64;
  float* x = static_cast<float*>(cuda_alloc(max_batch * inter * sizeof(float)));
  float* y = static_cast<float*>(cuda_alloc(max_batch * 2 * inter * sizeof(float)));
  cuda_memset(x, 0, max_batch * inter * sizeof(float));
  const double floor_ms = weight_bytes / bw * 1e3;  // every weight byte read once at the measured HBM rate
  struct Row { int batch; double ms; };
  std::vector<Row> decode;
  for (int batch : {1, 8, 64}) {
    const double t = time_it([&] {
      size_t i = 0;
      for (int l = 0; l < layers; ++l)
        for (const Proj& p : projs) be->matmul_nt(x, w[i++], y, batch, p.n, p.k);
    }, 5);
    decode.push_back({batch, t * 1e3});
    std::printf("decode batch %d: %.2f ms per step (%d layers, %.2f GB fp32 weights)\n", batch, t * 1e3, layers,
                weight_bytes / 1e9);
  }
  for (float* p : w) cuda_free(p);
  cuda_free(x);
  cuda_free(y);

  // 3. Prefill-sized GEMM: fp32 through the backend, TF32 through cuBLAS directly.
  const int64_t m = 4096, n = inter, k = H;
  float* px = static_cast<float*>(cuda_alloc(m * k * sizeof(float)));
  float* pw = static_cast<float*>(cuda_alloc(n * k * sizeof(float)));
  float* py = static_cast<float*>(cuda_alloc(m * n * sizeof(float)));
  cuda_memset(px, 0, m * k * sizeof(float));
  cuda_memset(pw, 0, n * k * sizeof(float));
  const double flops = 2.0 * m * n * k;
  const double t_fp32 = time_it([&] { be->matmul_nt(px, pw, py, m, n, k); }, 5);
  cublasHandle_t h;
  cublasCreate(&h);
  cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
  const float one = 1.0f, zero = 0.0f;
  const double t_tf32 = time_it([&] {
    cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &one, pw, int(k), px, int(k), &zero, py, int(n));
  }, 5);
  cublasDestroy(h);
  cuda_free(px);
  cuda_free(pw);
  cuda_free(py);

  std::printf("\n%-34s %12s %12s\n", "measurement", "value", "reference");
  std::printf("%-34s %9.0f GB/s %12s\n", "copy bandwidth (read+write)", bw / 1e9, "HBM3e 4800");
  for (const Row& r : decode)
    std::printf("decode step batch %-3d (ms)         %12.2f %9.2f ms  (%.0f%% of floor)\n", r.batch, r.ms, floor_ms,
                100.0 * floor_ms / r.ms);
  std::printf("%-34s %7.1f TF/s %12s\n", "prefill GEMM fp32 (backend)", flops / t_fp32 / 1e12, "fp32 ~67");
  std::printf("%-34s %7.1f TF/s %12s\n", "prefill GEMM tf32 (cuBLAS)", flops / t_tf32 / 1e12, "tf32 ~495");
  return 0;
}
