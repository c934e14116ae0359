// Per-row statistics of a vocabulary shard's logits, one thread block per row: max, the lowest
// vocabulary id reaching it, sum of exp(l - max) and the target's logit (NaN unless the target lies
// in [vocab_begin, vocab_begin + vocab_shard)). The ranks' stats are then merged exactly as the CPU
// LM head does. CPU twin: the ShardStats loop in ModelRunner::compute_logits (model_runner.cpp),
// which sums in double; fp32 here.
#include <cmath>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ bool better(float v, int64_t j, float bv, int64_t bj) {
  return v > bv || (v == bv && j < bj);
}

__global__ void logit_stats_kernel(const float* logits, int64_t vn, int64_t v0, const int32_t* targets,
                                   LogitStats* stats) {
  __shared__ float best_v[kThreads];
  __shared__ int64_t best_j[kThreads];
  const float* row = logits + blockIdx.x * vn;
  float bv = -INFINITY;
  int64_t bj = vn;  // "none": loses every tie
  for (int64_t j = threadIdx.x; j < vn; j += blockDim.x)
    if (better(row[j], j, bv, bj)) bv = row[j], bj = j;
  best_v[threadIdx.x] = bv;
  best_j[threadIdx.x] = bj;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s && better(best_v[threadIdx.x + s], best_j[threadIdx.x + s], best_v[threadIdx.x],
                                  best_j[threadIdx.x])) {
      best_v[threadIdx.x] = best_v[threadIdx.x + s];
      best_j[threadIdx.x] = best_j[threadIdx.x + s];
    }
    __syncthreads();
  }
  const float mx = best_v[0];
  float se = 0.0f;
  for (int64_t j = threadIdx.x; j < vn; j += blockDim.x) se += expf(row[j] - mx);
  se = block_sum(se);
  if (threadIdx.x == 0) {
    LogitStats st;
    st.max_logit = mx;
    st.argmax = best_j[0] < vn ? static_cast<int32_t>(v0 + best_j[0]) : 0;
    st.sum_exp = se;
    const int64_t t = targets ? targets[blockIdx.x] : -1;
    st.target_logit = (t >= v0 && t < v0 + vn) ? row[t - v0] : __int_as_float(0x7fc00000);
    stats[blockIdx.x] = st;
  }
}

}  // namespace

void logit_stats(const float* logits, int64_t rows, int64_t vocab_shard, int64_t vocab_begin, const int32_t* targets,
                 LogitStats* stats, cudaStream_t stream) {
  if (rows == 0) return;
  logit_stats_kernel<<<rows, kThreads, 0, stream>>>(logits, vocab_shard, vocab_begin, targets, stats);
}

}  // namespace tpbatch::kernels
