#pragma once
// Host-side launchers of the CUDA kernels in kernels/*.cu. One concept per file, each written
// plainly (llm.c style) and documented with its CPU twin in src/backend/cpu/cpu_backend.cpp,
// which tests/gpu/test_cuda_kernels.cpp checks it against. All pointers are device pointers;
// activations are fp32 with fp32 accumulation. Every launcher is asynchronous on `stream`.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace tpbatch::kernels {

// rmsnorm.cu — out[m,n] = x * rsqrt(mean(x^2) + eps) * w.  CPU: CpuBackend::rmsnorm.
template <typename W>
void rmsnorm(const float* x, const W* w, float* out, int64_t m, int64_t n, float eps, cudaStream_t stream);
// rmsnorm.cu — fused residual add + RMSNorm: x += residual, then out = rmsnorm(x) * w.
// CPU: CpuBackend::add followed by CpuBackend::rmsnorm.
template <typename W>
void add_rmsnorm(float* x, const float* residual, const W* w, float* out, int64_t m, int64_t n, float eps,
                 cudaStream_t stream);

// rope.cu — rotate-half RoPE in place.  CPU: CpuBackend::rope.
void rope(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const int32_t* positions,
          const float* inv_freq, cudaStream_t stream);

// paged_attention.cu — the step's per-row view of the sequences (built on the host by the backend
// from AttentionSeq): position of the row (-1: the row belongs to no sequence), offset of its
// sequence's block table in `tables`, and that table's length.
struct AttentionRow {
  int32_t pos;
  int32_t table_offset;
  int32_t num_blocks;
};
// Appends k/v rows into the paged caches ([num_blocks][kv_heads][block_size][head_dim]).
// CPU: step 1 of CpuBackend::paged_attention.
void kv_append(const float* k, const float* v, int64_t kv_stride, float* k_cache, float* v_cache, int64_t kv_heads,
               int64_t block_size, int64_t head_dim, const AttentionRow* rows, const int32_t* tables,
               int64_t num_rows, cudaStream_t stream);
// Causal GQA attention of each row over its sequence's cache (positions first..pos, first =
// pos-window+1 with a sliding window), online softmax, one thread block per (row, q head).
// CPU: step 2 of CpuBackend::paged_attention.
void paged_attention(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                     int64_t kv_heads, int64_t block_size, int64_t head_dim, int64_t window, int64_t q_heads,
                     const AttentionRow* rows, const int32_t* tables, int64_t num_rows, float* out,
                     cudaStream_t stream);

// silu_mul.cu — out[m,i] = silu(gu[m,i]) * gu[m,inter+i].  CPU: CpuBackend::silu_mul.
void silu_mul(const float* gu, float* out, int64_t m, int64_t inter, cudaStream_t stream);

// embedding.cu — vocab-masked lookup: out[i,:] = table[ids[i]-vocab_begin,:] or 0 outside the
// shard's range.  CPU: CpuBackend::embedding.
template <typename W>
void embedding(const int32_t* ids, int64_t count, const W* table, int64_t vocab_begin, int64_t vocab_end,
               int64_t dim, float* out, cudaStream_t stream);

// logit_stats.cu — per row of a vocabulary shard's logits: max, lowest-id argmax (global id =
// vocab_begin + j), sum of exp(l - max), and the target's logit (NaN unless the target id lies in
// the shard). Same layout as ShardStats in src/model/model_runner.cpp (the CPU twin).
struct LogitStats {
  float max_logit;
  int32_t argmax;
  float sum_exp;
  float target_logit;
};
void logit_stats(const float* logits, int64_t rows, int64_t vocab_shard, int64_t vocab_begin,
                 const int32_t* targets, LogitStats* stats, cudaStream_t stream);

// elementwise.cu — x[i] += y[i] (CpuBackend::add); x[m,n] += bias[n] (CpuBackend::add_bias).
void add(float* x, const float* y, size_t count, cudaStream_t stream);
void add_bias(float* x, const float* bias, int64_t m, int64_t n, cudaStream_t stream);

// convert.cu — weight upload: bf16/fp16 <-> fp32, element by element (round to nearest even).
template <typename From, typename To>
void convert(const From* in, To* out, size_t count, cudaStream_t stream);

}  // namespace tpbatch::kernels
