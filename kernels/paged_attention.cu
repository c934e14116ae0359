// Paged KV cache append + causal GQA attention over block tables, for prefill chunks and decode
// rows alike. Cache layout per layer (KvLayout): [num_blocks][kv_heads][block_size][head_dim] for
// K and for V (F32 or BF16); position p of a sequence lives in block table[p / block_size], slot
// p % block_size. CPU twin: CpuBackend::paged_attention (step 1 = kv_append, step 2 = attention).
//
// Attention: one thread block per (tile, kv head [x q-head chunk], split). A tile is 2^s
// consecutive rows of one sequence times the q heads that share one kv head (at most 16
// queries). The block walks the tile's visible positions in blocks of kKvBlock positions: the
// K and V of those positions are read once into shared memory (as fp32) and every query of the
// tile uses them — so a prefill chunk reads its context once per 16 queries, not once per query
// row and head. Each warp owns up to 4 queries; a lane holds head_dim/32 of each query's
// elements, a warp-wide sum gives each score, and an online softmax keeps (max, sum, output) in
// registers. With splits > 1 (few tiles: decode at small batch) each block covers one slice of
// the context and writes its partial (max, sum, output); merge_kernel combines the slices
// (flash-decoding). Each query masks positions outside [pos - window + 1, pos] itself.
#include <cmath>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kQueriesPerWarp = kMaxTileQueries / kWarps;
constexpr int kKvBlock = 16;   // positions per shared-memory K/V block
constexpr int kMaxSplits = 64;

__device__ __forceinline__ int64_t cache_offset(const int32_t* table, int64_t pos, int64_t head, int64_t kvh,
                                                int64_t bs, int64_t hd) {
  const int64_t block = table[pos / bs];
  return ((block * kvh + head) * bs + pos % bs) * hd;
}

template <typename T, typename C>
__global__ void kv_append_kernel(const T* k, const T* v, int64_t kv_stride, C* k_cache, C* v_cache, int64_t kvh,
                                 int64_t bs, int64_t hd, const AttentionRow* rows, const int32_t* tables) {
  const int64_t row = blockIdx.x;
  const AttentionRow ar = rows[row];
  if (ar.pos < 0) return;
  const int32_t* table = tables + ar.table_offset;
  for (int64_t t = threadIdx.x; t < kvh * hd; t += blockDim.x) {
    const int64_t h = t / hd, d = t % hd;
    const int64_t off = cache_offset(table, ar.pos, h, kvh, bs, hd) + d;
    k_cache[off] = from_float<C>(to_float(k[row * kv_stride + t]));
    v_cache[off] = from_float<C>(to_float(v[row * kv_stride + t]));
  }
}

struct AttentionArgs {
  int64_t q_stride, kvh, bs, hd, window, q_heads, group;
  int tile_shape;
  int64_t heads_per_tile, head_chunks, splits;
  float scale;
  float softcap;    // 0: none
  float* part_acc;  // [rows * q_heads][splits][hd]  (splits > 1)
  float* part_ml;   // [rows * q_heads][splits][2]: max, sum
};

// kEpl: elements of a head each lane holds (head_dim <= 32 * kEpl).
template <typename T, typename C, int kEpl>
__global__ void __launch_bounds__(kThreads) attention_kernel(const T* q, const C* k_cache, const C* v_cache, T* out,
                                                             AttentionArgs a, StepView step) {
  extern __shared__ float smem[];
  float* sk = smem;                  // [kKvBlock][hd]
  float* sv = smem + kKvBlock * a.hd;  // [kKvBlock][hd]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t hd = a.hd;

  // Which sequence and rows: the last sequence whose first tile is at or before this one.
  const int32_t* prefix = step.tile_prefix + a.tile_shape * (step.num_seqs + 1);
  const int64_t tile = blockIdx.x;
  int64_t lo_s = 0, hi_s = step.num_seqs - 1;
  while (lo_s < hi_s) {
    const int64_t mid = (lo_s + hi_s + 1) / 2;
    if (prefix[mid] <= tile) lo_s = mid; else hi_s = mid - 1;
  }
  const int64_t seq = lo_s;
  const int64_t rows_per_tile = int64_t(1) << a.tile_shape;
  const int64_t row0 = step.seq_row_begin[seq] + (tile - prefix[seq]) * rows_per_tile;
  const int64_t row_end = min(row0 + rows_per_tile, int64_t(step.seq_row_begin[seq]) + step.seq_num_rows[seq]);
  const AttentionRow first_row = step.attn_rows[row0];
  const int32_t* table = step.tables + first_row.table_offset;
  const int64_t kv_head = blockIdx.y / a.head_chunks, chunk = blockIdx.y % a.head_chunks;

  // The tile's visible positions [lo, hi], and this split's slice of them.
  const int64_t hi = first_row.pos + (row_end - 1 - row0);
  const int64_t lo = a.window > 0 ? max(int64_t(0), first_row.pos - a.window + 1) : 0;
  const int64_t per_split = (hi - lo + 1 + a.splits - 1) / a.splits;
  const int64_t slice = (per_split + kKvBlock - 1) / kKvBlock * kKvBlock;
  const int64_t s_lo = lo + blockIdx.z * slice, s_hi = min(hi, s_lo + slice - 1);

  // This warp's queries.
  bool valid[kQueriesPerWarp];
  int64_t q_row[kQueriesPerWarp], q_head[kQueriesPerWarp], q_first[kQueriesPerWarp], q_last[kQueriesPerWarp];
  float qv[kQueriesPerWarp][kEpl], acc[kQueriesPerWarp][kEpl], m[kQueriesPerWarp], l[kQueriesPerWarp];
#pragma unroll
  for (int j = 0; j < kQueriesPerWarp; ++j) {
    const int64_t qi = warp * kQueriesPerWarp + j;
    const int64_t in_group = chunk * a.heads_per_tile + qi % a.heads_per_tile;
    q_row[j] = row0 + qi / a.heads_per_tile;
    q_head[j] = kv_head * a.group + in_group;
    valid[j] = qi < rows_per_tile * a.heads_per_tile && q_row[j] < row_end && in_group < a.group;
    q_last[j] = first_row.pos + (q_row[j] - row0);
    q_first[j] = a.window > 0 ? max(int64_t(0), q_last[j] - a.window + 1) : 0;
    m[j] = -INFINITY;
    l[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < kEpl; ++i) {
      const int64_t d = lane + 32 * i;
      qv[j][i] = valid[j] && d < hd ? to_float(q[q_row[j] * a.q_stride + q_head[j] * hd + d]) : 0.0f;
      acc[j][i] = 0.0f;
    }
  }

  for (int64_t p0 = s_lo; p0 <= s_hi; p0 += kKvBlock) {
    const int64_t n = min(int64_t(kKvBlock), s_hi - p0 + 1);
    __syncthreads();  // the previous block's K/V are no longer read
    for (int64_t e = threadIdx.x; e < n * hd; e += kThreads) {
      const int64_t off = cache_offset(table, p0 + e / hd, kv_head, a.kvh, a.bs, hd) + e % hd;
      sk[e] = to_float(k_cache[off]);
      sv[e] = to_float(v_cache[off]);
    }
    __syncthreads();
    for (int64_t t = 0; t < n; ++t) {
      const int64_t p = p0 + t;
      const float* kp = sk + t * hd;
      const float* vp = sv + t * hd;
#pragma unroll
      for (int j = 0; j < kQueriesPerWarp; ++j) {
        if (!valid[j] || p < q_first[j] || p > q_last[j]) continue;  // uniform over the warp
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kEpl; ++i)
          if (lane + 32 * i < hd) dot += qv[j][i] * kp[lane + 32 * i];
        float s = warp_sum(dot) * a.scale;
        if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);  // Gemma 2
        const float new_m = fmaxf(m[j], s);
        const float factor = expf(m[j] - new_m);  // 0 on the first visible position
        const float e = expf(s - new_m);
        l[j] = l[j] * factor + e;
#pragma unroll
        for (int i = 0; i < kEpl; ++i)
          if (lane + 32 * i < hd) acc[j][i] = acc[j][i] * factor + e * vp[lane + 32 * i];
        m[j] = new_m;
      }
    }
  }

#pragma unroll
  for (int j = 0; j < kQueriesPerWarp; ++j) {
    if (!valid[j]) continue;
    if (a.splits == 1) {
      T* o = out + q_row[j] * (a.q_heads * hd) + q_head[j] * hd;
      const float inv = 1.0f / l[j];
#pragma unroll
      for (int i = 0; i < kEpl; ++i)
        if (lane + 32 * i < hd) o[lane + 32 * i] = from_float<T>(acc[j][i] * inv);
    } else {
      const int64_t idx = (q_row[j] * a.q_heads + q_head[j]) * a.splits + blockIdx.z;
#pragma unroll
      for (int i = 0; i < kEpl; ++i)
        if (lane + 32 * i < hd) a.part_acc[idx * hd + lane + 32 * i] = acc[j][i];
      if (lane == 0) {
        a.part_ml[idx * 2] = m[j];
        a.part_ml[idx * 2 + 1] = l[j];
      }
    }
  }
}

// One block per (row, q head): out = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M).
template <typename T>
__global__ void merge_kernel(T* out, AttentionArgs a, const AttentionRow* rows) {
  const int64_t row = blockIdx.x / a.q_heads, h = blockIdx.x % a.q_heads;
  if (rows[row].pos < 0) return;
  const int64_t base = blockIdx.x * a.splits;
  float mx = -INFINITY;
  for (int64_t s = 0; s < a.splits; ++s) mx = fmaxf(mx, a.part_ml[(base + s) * 2]);
  float denom = 0.0f;
  for (int64_t s = 0; s < a.splits; ++s) {
    const float ms = a.part_ml[(base + s) * 2];
    if (ms != -INFINITY) denom += a.part_ml[(base + s) * 2 + 1] * expf(ms - mx);
  }
  const float inv = 1.0f / denom;
  T* o = out + row * (a.q_heads * a.hd) + h * a.hd;
  for (int64_t d = threadIdx.x; d < a.hd; d += blockDim.x) {
    float v = 0.0f;
    for (int64_t s = 0; s < a.splits; ++s) {
      const float ms = a.part_ml[(base + s) * 2];
      if (ms != -INFINITY) v += a.part_acc[(base + s) * a.hd + d] * expf(ms - mx);
    }
    o[d] = from_float<T>(v * inv);
  }
}

}  // namespace

AttentionGrid attention_grid(int64_t group, int64_t kv_heads, const int64_t* tiles_by_shape, int64_t max_span,
                             int sms) {
  AttentionGrid g;
  g.heads_per_tile = group < kMaxTileQueries ? group : kMaxTileQueries;
  g.head_chunks = (group + g.heads_per_tile - 1) / g.heads_per_tile;
  const int64_t rows_fit = kMaxTileQueries / g.heads_per_tile;
  while (g.tile_shape + 1 < kTileShapes && (int64_t(2) << g.tile_shape) <= rows_fit) ++g.tile_shape;
  g.tiles = tiles_by_shape[g.tile_shape];
  const int64_t blocks = g.tiles * kv_heads * g.head_chunks;
  const int64_t want = 2 * int64_t(sms > 0 ? sms : 1);
  if (blocks > 0 && blocks < want) {
    int64_t splits = (want + blocks - 1) / blocks;
    const int64_t by_span = (max_span + 2 * kKvBlock - 1) / (2 * kKvBlock);
    splits = splits < by_span ? splits : by_span;
    splits = splits < kMaxSplits ? splits : kMaxSplits;
    g.splits = splits > 1 ? splits : 1;
  }
  return g;
}

size_t attention_scratch_floats(int64_t rows, int64_t q_heads, int64_t head_dim, int64_t splits) {
  return splits > 1 ? static_cast<size_t>(rows * q_heads * splits * (head_dim + 2)) : 0;
}

void kv_append(BufferView k, BufferView v, int64_t kv_stride, BufferView k_cache, BufferView v_cache,
               const KvLayout& kv, const StepView& step, cudaStream_t stream) {
  if (step.rows == 0) return;
  if (v.dtype != k.dtype) unsupported("paged_attention", "v (differs from k)", v.dtype);
  if (k_cache.dtype != kv.dtype || v_cache.dtype != kv.dtype)
    unsupported("paged_attention", "cache (differs from KvLayout::dtype)", k_cache.dtype);
  dispatch_act(k.dtype, "paged_attention", "k", [&](auto kt) {
    dispatch_act(kv.dtype, "paged_attention", "KV cache", [&](auto ct) {
      using T = typename decltype(kt)::type;
      using C = typename decltype(ct)::type;
      kv_append_kernel<T, C><<<step.rows, 128, 0, stream>>>(k.as<T>(), v.as<T>(), kv_stride, k_cache.as<C>(),
                                                             v_cache.as<C>(), kv.kv_heads, kv.block_size, kv.head_dim,
                                                             step.attn_rows, step.tables);
    });
  });
}

void paged_attention(BufferView q, int64_t q_stride, BufferView k_cache, BufferView v_cache, const KvLayout& kv,
                     int64_t q_heads, BufferView out, const AttentionGrid& grid, float* scratch, const StepView& step,
                     cudaStream_t stream) {
  if (step.rows == 0 || q_heads == 0 || grid.tiles == 0) return;
  if (kv.head_dim > 32 * 8) throw Error("CUDA backend: paged_attention: head_dim " + std::to_string(kv.head_dim) +
                                        " above the supported 256");
  if (out.dtype != q.dtype) unsupported("paged_attention", "out (differs from q)", out.dtype);
  AttentionArgs a{};
  a.q_stride = q_stride;
  a.kvh = kv.kv_heads;
  a.bs = kv.block_size;
  a.hd = kv.head_dim;
  a.window = kv.window;
  a.q_heads = q_heads;
  a.group = q_heads / kv.kv_heads;
  a.tile_shape = grid.tile_shape;
  a.heads_per_tile = grid.heads_per_tile;
  a.head_chunks = grid.head_chunks;
  a.splits = grid.splits;
  a.scale = kv.scale > 0.0f ? kv.scale : 1.0f / sqrtf(static_cast<float>(kv.head_dim));
  a.softcap = kv.softcap;
  a.part_acc = scratch;
  a.part_ml = scratch ? scratch + static_cast<size_t>(step.rows * q_heads * grid.splits * kv.head_dim) : nullptr;
  if (grid.splits > 1 && !scratch) throw Error("CUDA backend: paged_attention: split attention without scratch");
  const dim3 blocks(static_cast<unsigned>(grid.tiles), static_cast<unsigned>(kv.kv_heads * grid.head_chunks),
                    static_cast<unsigned>(grid.splits));
  const size_t smem = 2 * kKvBlock * kv.head_dim * sizeof(float);
  dispatch_act(q.dtype, "paged_attention", "q", [&](auto qt) {
    dispatch_act(kv.dtype, "paged_attention", "KV cache", [&](auto ct) {
      using T = typename decltype(qt)::type;
      using C = typename decltype(ct)::type;
      auto launch = [&](auto kernel) {
        kernel<<<blocks, kThreads, smem, stream>>>(q.as<T>(), k_cache.as<C>(), v_cache.as<C>(), out.as<T>(), a, step);
      };
      if (kv.head_dim <= 64)
        launch(attention_kernel<T, C, 2>);
      else if (kv.head_dim <= 128)
        launch(attention_kernel<T, C, 4>);
      else
        launch(attention_kernel<T, C, 8>);
      if (grid.splits > 1)
        merge_kernel<T><<<static_cast<unsigned>(step.rows * q_heads), 128, 0, stream>>>(out.as<T>(), a,
                                                                                         step.attn_rows);
    });
  });
}

}  // namespace tpbatch::kernels
