// Paged KV cache append + causal GQA attention over block tables.
// Cache layout per layer (KvLayout): [num_blocks][kv_heads][block_size][head_dim] for K and for V;
// position p of a sequence lives in block tables[p / block_size], slot p % block_size.
// CPU twin: CpuBackend::paged_attention (step 1 = kv_append, step 2 = paged_attention).
//
// One kernel serves prefill chunks and decode alike: one thread block per (row, q head). The block
// walks the row's visible positions (first..pos; first = pos - window + 1 with a sliding window)
// in tiles of blockDim positions: each thread scores one position (q·k / sqrt(head_dim)), the tile's
// max updates the running max (online softmax: earlier sums and outputs are rescaled by
// exp(old_max - new_max)), and each thread then accumulates its output dimensions over the tile.
#include <cmath>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kThreads = 128;

__device__ __forceinline__ int64_t cache_offset(const int32_t* table, int64_t pos, int64_t head, int64_t kvh,
                                                int64_t bs, int64_t hd) {
  const int64_t block = table[pos / bs];
  return ((block * kvh + head) * bs + pos % bs) * hd;
}

__global__ void kv_append_kernel(const float* k, const float* v, int64_t kv_stride, float* k_cache, float* v_cache,
                                 int64_t kvh, int64_t bs, int64_t hd, const AttentionRow* rows,
                                 const int32_t* tables) {
  const int64_t row = blockIdx.x;
  const AttentionRow ar = rows[row];
  if (ar.pos < 0) return;
  const int32_t* table = tables + ar.table_offset;
  for (int64_t t = threadIdx.x; t < kvh * hd; t += blockDim.x) {
    const int64_t h = t / hd, d = t % hd;
    const int64_t off = cache_offset(table, ar.pos, h, kvh, bs, hd) + d;
    k_cache[off] = k[row * kv_stride + t];
    v_cache[off] = v[row * kv_stride + t];
  }
}

__global__ void attention_kernel(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                                 int64_t kvh, int64_t bs, int64_t hd, int64_t window, int64_t q_heads,
                                 const AttentionRow* rows, const int32_t* tables, float* out) {
  extern __shared__ float smem[];
  float* sq = smem;             // [hd] the query head
  float* acc = smem + hd;       // [hd] unnormalised output
  float* w = smem + 2 * hd;     // [blockDim] this tile's softmax weights
  const int64_t row = blockIdx.x / q_heads, h = blockIdx.x % q_heads;
  const AttentionRow ar = rows[row];
  if (ar.pos < 0) return;
  const int32_t* table = tables + ar.table_offset;
  const int64_t g = h / (q_heads / kvh);
  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    sq[d] = q[row * q_stride + h * hd + d];
    acc[d] = 0.0f;
  }
  __syncthreads();
  const int64_t last = ar.pos, first = window > 0 ? max(int64_t(0), last - window + 1) : 0;
  float m = -INFINITY, denom = 0.0f;
  for (int64_t p0 = first; p0 <= last; p0 += blockDim.x) {
    const int64_t p = p0 + threadIdx.x;
    float s = -INFINITY;
    if (p <= last) {
      const float* kp = k_cache + cache_offset(table, p, g, kvh, bs, hd);
      float dot = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dot += sq[d] * kp[d];
      s = dot * scale;
    }
    const float new_m = fmaxf(m, block_max(s));
    const float factor = expf(m - new_m);  // 0 on the first tile
    const float e = p <= last ? expf(s - new_m) : 0.0f;
    w[threadIdx.x] = e;
    denom = denom * factor + block_sum(e);  // block_sum's barriers also publish w[]
    const int64_t n = min(int64_t(blockDim.x), last - p0 + 1);
    for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
      float a = acc[d] * factor;
      for (int64_t t = 0; t < n; ++t) a += w[t] * v_cache[cache_offset(table, p0 + t, g, kvh, bs, hd) + d];
      acc[d] = a;
    }
    m = new_m;
    __syncthreads();  // w[] is rewritten by the next tile
  }
  float* o = out + row * (q_heads * hd) + h * hd;
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) o[d] = acc[d] / denom;
}

}  // namespace

void kv_append(const float* k, const float* v, int64_t kv_stride, float* k_cache, float* v_cache, int64_t kv_heads,
               int64_t block_size, int64_t head_dim, const AttentionRow* rows, const int32_t* tables, int64_t num_rows,
               cudaStream_t stream) {
  if (num_rows == 0) return;
  kv_append_kernel<<<num_rows, kThreads, 0, stream>>>(k, v, kv_stride, k_cache, v_cache, kv_heads, block_size,
                                                       head_dim, rows, tables);
}

void paged_attention(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache, int64_t kv_heads,
                     int64_t block_size, int64_t head_dim, int64_t window, int64_t q_heads, const AttentionRow* rows,
                     const int32_t* tables, int64_t num_rows, float* out, cudaStream_t stream) {
  if (num_rows == 0 || q_heads == 0) return;
  const size_t smem = (2 * head_dim + kThreads) * sizeof(float);
  attention_kernel<<<num_rows * q_heads, kThreads, smem, stream>>>(q, q_stride, k_cache, v_cache, kv_heads, block_size,
                                                                   head_dim, window, q_heads, rows, tables, out);
}

}  // namespace tpbatch::kernels
