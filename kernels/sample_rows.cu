// The sampled draw of whole F32 logits rows, on the device: the token sample_token_reference
// (src/engine/sampler_reference.h) returns, computed the same way, so that only token ids cross
// the bus. CPU twin: CpuBackend::sample_rows (the host's fast sampler, the same token).
//
// One thread block per row:
//  1. the row's maximum, and whether it holds a NaN (block reductions);
//  2. candidates: tokens with (l - max) / T > -37 in double, as the reference computes it. The
//     others have p = exp(...) <= exp(-37) < 2^-53: every sum of p the reference takes starts with
//     p_0 = 1, so adding one of them rounds back to the sum, and they sit after every candidate in
//     its order: they change neither z, nor the kept mass, nor where the draw lands;
//  3. one 64-bit key per token, (logit descending, id ascending) for candidates and all ones for the
//     rest, bitonic-sorted in global scratch: the candidates come first, in the reference's order;
//  4. p_i = exp((l_i - max) / T) in double for each candidate, by all threads;
//  5. thread 0 takes the reference's double sums over them, in its order (z, the top-p cut, the
//     min-p cut, the kept mass, u = counter_uniform * mass, the first running sum above u).
// A row the kernel cannot decide gets token -1 and goes to the host (CudaBackend::sample_rows):
// a NaN logit or a maximum that is not finite (the reference's arithmetic then has NaNs, and its
// sort no strict order), a cut the tail could move (top-p not reached, or a min-p floor at or
// below the tail's p), or a comparison within a relative 1e-9 of its threshold: the device's
// double exp may differ from the host's by an ulp (CUDA documents 1 ulp), which moves a running
// sum of up to 2^17 terms by far less than that, so every comparison outside the margin is the
// host's. On the emulated device exp is the host's, and the margin only costs a host draw.
//
// Cost (not measured on a GPU): the sort is over the next power of two above the vocabulary
// whatever the candidate count: at 128k about 150 passes over 1 MiB of keys per row (in L2), and
// thread 0's serial sums are one double add per candidate (at temperature 1 most of a language
// model's vocabulary is within 37 nats: ~128k dependent adds, a few hundred microseconds). Rows
// run in parallel blocks. A faster version would compact the candidates first (a block scan) and
// sort only them in shared memory, or select the top-p / top-k prefix without a full sort, and
// take the running sums as a block-wide scan checked against the serial order's rounding bound.
#include <cmath>
#include <cstdint>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kNotCandidate = ~uint64_t(0);
constexpr double kTailProbBound = 1e-16;  // above exp(-37) = 8.53e-17: no tail token's p reaches it
constexpr double kClose = 1e-9;           // comparisons closer than this (relative) go to the host

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// counter_uniform (engine/sampler.h), bit for bit: the draw's uniform in [0, 1).
__device__ inline double counter_uniform(uint64_t seed, uint64_t row, uint64_t step, uint64_t sample) {
  uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ row) ^ step);
  if (sample != 0) h = splitmix64(h ^ splitmix64(sample));
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

// Ascending keys in the reference's order: a larger logit first (its order-preserving bits,
// inverted), then the lower id. -0 is +0: the reference compares them equal.
__device__ inline uint64_t sort_key(float l, int64_t id) {
  if (l == 0.0f) l = 0.0f;
  const uint32_t u = __float_as_uint(l);
  const uint32_t ascending = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<uint64_t>(~ascending) << 32) | static_cast<uint32_t>(id);
}

__device__ inline bool near(double a, double b) { return fabs(a - b) <= kClose * fmax(fabs(a), fabs(b)); }

// The reference's sums over the sorted candidates' p (prob[0..nc)); -1 when it cannot decide.
__device__ int64_t draw_index(const double* prob, int64_t nc, int64_t vocab, const DrawParams& p) {
  const int64_t list = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  const int64_t m = list < nc ? list : nc;  // the list's candidates; its other tokens add nothing
  bool sure = true;
  double z = 0.0;
  for (int64_t i = 0; i < m; ++i) z += prob[i];
  int64_t keep = list;  // keep > m: somewhere among the tail tokens, not known here
  if (p.top_p < 1.0) {
    double cum = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      cum += prob[i] / z;
      sure = sure && !near(cum, p.top_p);
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  if (p.min_p > 0.0) {
    const double floor = p.min_p * prob[0];
    int64_t i = 1;
    for (; i < keep && i < m; ++i) {
      sure = sure && !near(prob[i], floor);
      if (!(prob[i] >= floor)) break;
    }
    if (i < keep && (i < m || floor > kTailProbBound)) keep = i;  // cut at a candidate, or at the tail's first
  }
  const int64_t kept = keep < m ? keep : m;
  double mass = 0.0;
  for (int64_t i = 0; i < kept; ++i) mass += prob[i];
  const double u = counter_uniform(p.seed, p.row, p.step, p.sample) * mass;
  double cum = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    cum += prob[i];
    sure = sure && !near(u, cum);
    if (u < cum) return sure ? i : -1;
  }
  return sure && keep <= m ? keep - 1 : -1;  // past every running sum: the reference's last kept
}

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(const float* logits, int64_t vocab, const int64_t* rows,
                                                               const DrawParams* params, int64_t span, uint64_t* keys,
                                                               double* prob, DrawnToken* out) {
  const int64_t r = blockIdx.x;
  const float* row = logits + rows[r] * vocab;
  const DrawParams p = params[r];
  uint64_t* key = keys + r * span;
  double* pr = prob + r * span;

  float mx = -INFINITY, nans = 0.0f;
  for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float l = row[i];
    if (l != l) nans += 1.0f;
    mx = fmaxf(mx, l);
  }
  mx = block_max(mx);
  nans = block_sum(nans);
  if (nans > 0.0f || mx == INFINITY || mx == -INFINITY) {  // uniform over the block
    if (threadIdx.x == 0) out[r] = DrawnToken{-1, 0.0f};
    return;
  }

  const double dmx = mx;
  float count = 0.0f;  // candidates this thread saw (exact: a row has far fewer than 2^24)
  for (int64_t i = threadIdx.x; i < span; i += blockDim.x) {
    uint64_t k = kNotCandidate;
    if (i < vocab && (static_cast<double>(row[i]) - dmx) / p.temperature > -37.0) {
      k = sort_key(row[i], i);
      count += 1.0f;
    }
    key[i] = k;
  }
  const int64_t nc = static_cast<int64_t>(block_sum(count));
  __syncthreads();

  for (int64_t size = 2; size <= span; size <<= 1) {  // bitonic sort, ascending
    for (int64_t stride = size >> 1; stride > 0; stride >>= 1) {
      for (int64_t i = threadIdx.x; i < span; i += blockDim.x) {
        const int64_t j = i ^ stride;
        if (j > i) {
          const uint64_t a = key[i], b = key[j];
          if (((i & size) == 0) == (a > b)) {
            key[i] = b;
            key[j] = a;
          }
        }
      }
      __syncthreads();
    }
  }

  for (int64_t i = threadIdx.x; i < nc; i += blockDim.x) {
    const int64_t id = static_cast<uint32_t>(key[i]);
    pr[i] = exp((static_cast<double>(row[id]) - dmx) / p.temperature);
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    const int64_t at = draw_index(pr, nc, vocab, p);
    if (at < 0) {
      out[r] = DrawnToken{-1, 0.0f};
    } else {
      const int32_t id = static_cast<int32_t>(static_cast<uint32_t>(key[at]));
      out[r] = DrawnToken{id, row[id]};
    }
  }
}

}  // namespace

int64_t sample_rows_span(int64_t vocab) {
  int64_t span = 1;
  while (span < vocab) span <<= 1;
  return span;
}

size_t sample_rows_scratch_bytes(int64_t count, int64_t vocab) {
  return static_cast<size_t>(count * sample_rows_span(vocab)) * (sizeof(uint64_t) + sizeof(double));
}

void sample_rows(BufferView logits, int64_t vocab, const int64_t* rows, const DrawParams* params, int64_t count,
                 void* scratch, DrawnToken* out, cudaStream_t stream) {
  if (count == 0) return;
  if (logits.dtype != DType::F32) unsupported("sample_rows", "logits", logits.dtype);
  if (vocab < 1 || vocab > INT32_MAX) throw Error("CUDA backend: sample_rows: vocabulary of " + std::to_string(vocab));
  if (!scratch) throw Error("CUDA backend: sample_rows: no scratch for the sort");
  const int64_t span = sample_rows_span(vocab);
  auto* keys = static_cast<uint64_t*>(scratch);
  auto* prob = reinterpret_cast<double*>(keys + count * span);
  sample_rows_kernel<<<static_cast<unsigned>(count), kThreads, 0, stream>>>(logits.as<float>(), vocab, rows, params,
                                                                            span, keys, prob, out);
}

}  // namespace tpbatch::kernels
