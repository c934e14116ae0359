// The CUDA backend: cuBLAS SGEMM for matmul_nt, kernels/ for everything else. Same contract as
// CpuBackend (the reference, src/backend/cpu/cpu_backend.cpp) on device pointers; see cuda_backend.h.
#include "backend/cuda/cuda_backend.h"

#include <nccl.h>

#include <algorithm>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "kernels.h"

namespace tpbatch {
namespace {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device) : device_(device) {
    TPBATCH_CUDA_CHECK(cudaSetDevice(device));
    TPBATCH_CUDA_CHECK(cudaStreamCreate(&stream_));
    TPBATCH_CUBLAS_CHECK(cublasCreate(&cublas_));
    TPBATCH_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    // fp32 GEMMs stay fp32 (no TF32): results match the CPU backend to ~1e-6.
    TPBATCH_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    cudaFree(rows_);
    cudaFree(tables_);
    cublasDestroy(cublas_);
    cudaStreamDestroy(stream_);
  }
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda:" + std::to_string(device_); }

  void matmul_nt(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k) override {
    if (m == 0 || n == 0) return;
    // Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T[n,m] = w^T... : C(n x m) = op(A)=Wᵀ(k x n)ᵀ · B=Xᵀ(k x m).
    const float one = 1.0f, zero = 0.0f;
    TPBATCH_CUBLAS_CHECK(cublasSgemm(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                     static_cast<int>(k), &one, w, static_cast<int>(k), x, static_cast<int>(k), &zero,
                                     y, static_cast<int>(n)));
  }

  void rmsnorm(const float* x, const float* w, float* out, int64_t m, int64_t n, float eps) override {
    kernels::rmsnorm<float>(x, w, out, m, n, eps, stream_);
    TPBATCH_CUDA_LAUNCHED("rmsnorm");
  }

  void add_bias(float* x, const float* bias, int64_t m, int64_t n) override {
    kernels::add_bias(x, bias, m, n, stream_);
    TPBATCH_CUDA_LAUNCHED("add_bias");
  }

  void add(float* x, const float* y, size_t count) override {
    kernels::add(x, y, count, stream_);
    TPBATCH_CUDA_LAUNCHED("add");
  }

  void rope(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const int32_t* positions,
            const float* inv_freq) override {
    kernels::rope(x, rows, row_stride, heads, head_dim, positions, inv_freq, stream_);
    TPBATCH_CUDA_LAUNCHED("rope");
  }

  void silu_mul(const float* gu, float* out, int64_t m, int64_t inter) override {
    kernels::silu_mul(gu, out, m, inter, stream_);
    TPBATCH_CUDA_LAUNCHED("silu_mul");
  }

  void paged_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                       float* k_cache, float* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs,
                       int64_t num_seqs, float* out) override {
    // Flatten the host-side sequences into a per-row view and one concatenated block table.
    int64_t num_rows = 0;
    for (int64_t s = 0; s < num_seqs; ++s) num_rows = std::max(num_rows, seqs[s].row_begin + seqs[s].num_rows);
    if (num_rows == 0) return;
    host_rows_.assign(num_rows, kernels::AttentionRow{-1, 0, 0});
    host_tables_.clear();
    for (int64_t s = 0; s < num_seqs; ++s) {
      const AttentionSeq& sq = seqs[s];
      const auto offset = static_cast<int32_t>(host_tables_.size());
      host_tables_.insert(host_tables_.end(), sq.blocks, sq.blocks + sq.num_blocks);
      for (int64_t r = 0; r < sq.num_rows; ++r)
        host_rows_[sq.row_begin + r] = {static_cast<int32_t>(sq.pos_begin + r), offset, static_cast<int32_t>(sq.num_blocks)};
    }
    if (host_tables_.empty()) host_tables_.push_back(0);
    upload(rows_, rows_cap_, host_rows_.data(), host_rows_.size() * sizeof(kernels::AttentionRow));
    upload(tables_, tables_cap_, host_tables_.data(), host_tables_.size() * sizeof(int32_t));
    const auto* rows = static_cast<const kernels::AttentionRow*>(rows_);
    const auto* tables = static_cast<const int32_t*>(tables_);
    kernels::kv_append(k, v, kv_stride, k_cache, v_cache, kv.kv_heads, kv.block_size, kv.head_dim, rows, tables,
                       num_rows, stream_);
    TPBATCH_CUDA_LAUNCHED("kv_append");
    kernels::paged_attention(q, q_stride, k_cache, v_cache, kv.kv_heads, kv.block_size, kv.head_dim, kv.window, q_heads,
                             rows, tables, num_rows, out, stream_);
    TPBATCH_CUDA_LAUNCHED("paged_attention");
  }

  void embedding(const int32_t* ids, int64_t count, const float* table, int64_t vocab_begin, int64_t vocab_end,
                 int64_t dim, float* out) override {
    kernels::embedding<float>(ids, count, table, vocab_begin, vocab_end, dim, out, stream_);
    TPBATCH_CUDA_LAUNCHED("embedding");
  }

 private:
  // Copies host metadata into a grow-only device buffer, in stream order.
  void upload(void*& dev, size_t& cap, const void* host, size_t bytes) {
    if (bytes > cap) {
      TPBATCH_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the old buffer may still be read
      TPBATCH_CUDA_CHECK(cudaFree(dev));
      dev = nullptr;
      cap = std::max(bytes, 2 * cap);
      TPBATCH_CUDA_CHECK(cudaMalloc(&dev, cap));
    }
    // Pageable source: the call returns once the data is staged, so the host vector may change after.
    TPBATCH_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream_));
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::vector<kernels::AttentionRow> host_rows_;
  std::vector<int32_t> host_tables_;
  void* rows_ = nullptr;
  void* tables_ = nullptr;
  size_t rows_cap_ = 0, tables_cap_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver"/"no device" error
    return 0;
  }
  return n;
}

std::string cuda_build_info() {
  int rt = 0, nccl = 0;
  cudaRuntimeGetVersion(&rt);
  ncclGetVersion(&nccl);
  const int nccl_major = nccl / 10000, nccl_minor = nccl % 10000 / 100, nccl_patch = nccl % 100;
  return "CUDA runtime " + std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10) + ", NCCL " +
         std::to_string(nccl_major) + "." + std::to_string(nccl_minor) + "." + std::to_string(nccl_patch);
}

void* cuda_alloc(size_t bytes) {
  void* p = nullptr;
  if (bytes) TPBATCH_CUDA_CHECK(cudaMalloc(&p, bytes));
  return p;
}
void cuda_free(void* p) noexcept {
  if (p) cudaFree(p);
}
void cuda_copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) TPBATCH_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void cuda_copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) TPBATCH_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void cuda_copy_device(void* dst, const void* src, size_t bytes) {
  if (bytes) TPBATCH_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}
void cuda_memset(void* dst, int value, size_t bytes) {
  if (bytes) TPBATCH_CUDA_CHECK(cudaMemset(dst, value, bytes));
}
void cuda_synchronize() { TPBATCH_CUDA_CHECK(cudaDeviceSynchronize()); }

}  // namespace tpbatch
