// Per-row statistics of a vocabulary shard's F32 logits: max, the lowest vocabulary id reaching
// it, sum of exp(l - max) and the target's logit (NaN unless the target lies in [vocab_begin,
// vocab_begin + vocab_shard)). The targets are the step's logit_targets[first + i]. The ranks'
// stats are then merged on the host. CPU twin: CpuBackend::logit_stats (which may sum in double;
// fp32 here, rel. error ~1e-6).
//
// Two launches. partials_kernel: each row is cut into `splits` spans of whole 1024-float pieces,
// one thread block each, so that a batch of a few rows at a 128k vocab still fills every SM (one
// block per row would leave most of the GPU idle while it streams 512 KB). Each thread reads its
// elements once, with 16-byte loads, keeping an online (max, lowest argmax, sum of exp(l - max)):
// a single pass over the logits instead of one for the max and one for the sum. merge_kernel: one
// warp per row combines the row's partials in a fixed order, so the result does not depend on
// which block finished first (no atomics; a second launch instead of a last-block-done protocol).
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kPiece = 4 * kThreads;  // floats a block reads with one 16-byte load per thread
constexpr int32_t kNone = INT32_MAX;      // "no argmax yet": loses every tie

// A running (max, lowest index reaching it, sum of exp(l - max)) over some of a row's logits.
struct Partial {
  float m;
  float s;
  int32_t j;
  int32_t pad;
};
static_assert(sizeof(Partial) == 16);

// Adds logit v at index j. -inf logits add exp(-inf) = 0 even while the max is still -inf (as the
// CPU twin does); a NaN makes the sum NaN and never becomes the max (as on the CPU).
__device__ __forceinline__ void push(Partial& a, float v, int32_t j) {
  if (v > a.m) {
    a.s = a.s * expf(a.m - v) + 1.0f;  // expf(-inf) = 0 on the first finite logit
    a.m = v;
    a.j = j;
  } else if (v != -INFINITY) {
    a.s += expf(v - a.m);
    if (v == a.m && j < a.j) a.j = j;
  }
}

// The union of two partials: the larger max (the lower index on a tie), each sum rescaled to it.
__device__ __forceinline__ Partial combine(Partial a, Partial b) {
  if (b.m > a.m || (b.m == a.m && b.j < a.j)) {
    const Partial t = a;
    a = b;
    b = t;
  }
  const float scale = b.m == a.m ? 1.0f : expf(b.m - a.m);  // equal maxima (also both -inf): 1
  a.s += b.s * scale;
  return a;
}

__device__ __forceinline__ Partial warp_combine(Partial a) {
  for (int o = 16; o > 0; o >>= 1) {
    Partial b;
    b.m = __shfl_xor_sync(0xffffffffu, a.m, o);
    b.s = __shfl_xor_sync(0xffffffffu, a.s, o);
    b.j = __shfl_xor_sync(0xffffffffu, a.j, o);
    b.pad = 0;
    a = combine(a, b);
  }
  return a;
}

// Block `b` of row `r` (blockIdx.x = r * splits + b) reads [b * span, min((b + 1) * span, vn)).
__global__ void __launch_bounds__(kThreads) partials_kernel(const float* logits, int64_t vn, int64_t splits,
                                                            int64_t span, Partial* part) {
  __shared__ Partial warp_part[kThreads / 32];
  const int64_t r = blockIdx.x / splits, b = blockIdx.x % splits;
  const int64_t begin = b * span, end = min(vn, begin + span);
  const float* row = logits + r * vn;
  Partial a{-INFINITY, 0.0f, kNone, 0};
  // Rows start 16-byte aligned only when vn % 4 == 0: up to 3 scalar logits reach the boundary.
  const int64_t misalign = static_cast<int64_t>(reinterpret_cast<uintptr_t>(row + begin) % 16 / 4);
  const int64_t head = min(end - begin, (4 - misalign) % 4);
  if (threadIdx.x < head) push(a, row[begin + threadIdx.x], static_cast<int32_t>(begin + threadIdx.x));
  const int64_t vec_begin = begin + head, packs = (end - vec_begin) / 4;
  for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
    const Pack<float> pk = load_pack(row + vec_begin + 4 * i);
    const int32_t j = static_cast<int32_t>(vec_begin + 4 * i);
#pragma unroll
    for (int e = 0; e < 4; ++e) push(a, pk.v[e], j + e);
  }
  for (int64_t j = vec_begin + 4 * packs + threadIdx.x; j < end; j += kThreads)
    push(a, row[j], static_cast<int32_t>(j));

  // Block reduction: a butterfly in each warp, then warp 0 over the warps' results.
  a = warp_combine(a);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_part[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < kThreads / 32 ? warp_part[lane] : Partial{-INFINITY, 0.0f, kNone, 0};
    a = warp_combine(a);
    if (lane == 0) part[blockIdx.x] = a;
  }
}

// One warp per row: lane l combines partials l, l + 32, ... in order, then a butterfly.
__global__ void merge_kernel(const Partial* part, const float* logits, int64_t vn, int64_t v0, int64_t splits,
                             const int32_t* targets, LogitStats* stats) {
  const int64_t r = blockIdx.x;
  Partial a{-INFINITY, 0.0f, kNone, 0};
  for (int64_t b = threadIdx.x; b < splits; b += 32) a = combine(a, part[r * splits + b]);
  a = warp_combine(a);
  if (threadIdx.x == 0) {
    LogitStats st;
    st.max_logit = a.m;
    st.argmax = a.j != kNone ? static_cast<int32_t>(v0 + a.j) : 0;  // 0 when no logit beats -inf, as on the CPU
    st.sum_exp = a.s;
    const int64_t t = targets[r];
    st.target_logit = (t >= v0 && t < v0 + vn) ? logits[r * vn + (t - v0)] : __int_as_float(0x7fc00000);
    stats[r] = st;
  }
}

}  // namespace

LogitStatsGrid logit_stats_grid(int64_t count, int64_t vocab_shard, int sms) {
  LogitStatsGrid g;
  const int64_t pieces = vocab_shard > 0 ? (vocab_shard + kPiece - 1) / kPiece : 1;
  // About four blocks per SM over all rows, but no block under one piece (1024 floats).
  const int64_t want = count > 0 ? (4 * int64_t(sms > 0 ? sms : 1) + count - 1) / count : 1;
  const int64_t splits = want < pieces ? want : pieces;
  g.span = (pieces + splits - 1) / splits * kPiece;
  g.splits = vocab_shard > 0 ? (vocab_shard + g.span - 1) / g.span : 1;
  return g;
}

size_t logit_stats_scratch_bytes(int64_t count, const LogitStatsGrid& grid) {
  return static_cast<size_t>(count * grid.splits) * sizeof(Partial);
}

void logit_stats(BufferView logits, int64_t count, int64_t vocab_shard, int64_t vocab_begin, int64_t first,
                 BufferView stats, const LogitStatsGrid& grid, void* scratch, const StepView& step,
                 cudaStream_t stream) {
  if (count == 0) return;
  if (logits.dtype != DType::F32) unsupported("logit_stats", "logits", logits.dtype);
  if (first < 0 || first + count > step.num_logit_rows)
    throw Error("CUDA backend: logit_stats: rows [" + std::to_string(first) + ", " + std::to_string(first + count) +
                ") outside the step's " + std::to_string(step.num_logit_rows) + " logit rows");
  if (vocab_shard > INT32_MAX) throw Error("CUDA backend: logit_stats: vocabulary shard above 2^31 entries");
  if (!scratch) throw Error("CUDA backend: logit_stats: no scratch for the partials");
  auto* part = static_cast<Partial*>(scratch);
  partials_kernel<<<static_cast<unsigned>(count * grid.splits), kThreads, 0, stream>>>(
      logits.as<float>(), vocab_shard, grid.splits, grid.span, part);
  merge_kernel<<<static_cast<unsigned>(count), 32, 0, stream>>>(part, logits.as<float>(), vocab_shard, vocab_begin,
                                                                grid.splits, step.logit_targets + first,
                                                                stats.as<LogitStats>());
}

}  // namespace tpbatch::kernels
