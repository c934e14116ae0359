// Per-row statistics of a vocabulary shard's F32 logits, one thread block per row: max, the
// lowest vocabulary id reaching it, sum of exp(l - max) and the target's logit (NaN unless the
// target lies in [vocab_begin, vocab_begin + vocab_shard)). The targets are the step's
// logit_targets[first + i]. The ranks' stats are then merged on the host. CPU twin:
// CpuBackend::logit_stats (which may sum in double; fp32 here, rel. error ~1e-6).
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
    st.argmax = best_j[0] < vn ? static_cast<int32_t>(v0 + best_j[0]) : 0;  // 0 when no logit beats -inf, as on the CPU
    st.sum_exp = se;
    const int64_t t = targets[blockIdx.x];
    st.target_logit = (t >= v0 && t < v0 + vn) ? row[t - v0] : __int_as_float(0x7fc00000);
    stats[blockIdx.x] = st;
  }
}

}  // namespace

void logit_stats(BufferView logits, int64_t count, int64_t vocab_shard, int64_t vocab_begin, int64_t first,
                 BufferView stats, const StepView& step, cudaStream_t stream) {
  if (count == 0) return;
  if (logits.dtype != DType::F32) unsupported("logit_stats", "logits", logits.dtype);
  if (first < 0 || first + count > step.num_logit_rows)
    throw Error("CUDA backend: logit_stats: rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                ") outside the step's " + std::to_string(step.num_logit_rows) + " logit rows");
  logit_stats_kernel<<<count, kThreads, 0, stream>>>(logits.as<float>(), vocab_shard, vocab_begin,
                                                     step.logit_targets + first, stats.as<LogitStats>());
}

}  // namespace tpbatch::kernels
