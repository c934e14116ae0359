// Paged KV cache append + causal GQA attention over block tables, for prefill chunks and decode
// rows alike. Cache layout per layer (KvLayout): [num_blocks][kv_heads][block_size][head_dim] for
// K and for V (F32 or BF16); position p of a sequence lives in block table[p / block_size], slot
// p % block_size. CPU twin: CpuBackend::paged_attention (step 1 = kv_append, step 2 = attention).
//
// Attention: one thread block per (tile, kv head [x q-head chunk], split). A tile is 2^s
// consecutive rows of one sequence times the q heads that share one kv head (at most 16
// queries). The block walks the tile's visible positions in chunks of up to kKvBlock positions
// of one cache page: such a chunk is one contiguous run of the cache, so it is copied into shared
// memory (as fp32) with 16-byte loads and no per-element index arithmetic, and every query of the
// tile uses it — a prefill chunk reads its context once per 16 queries, not once per query.
//
// Warps: the tile's queries go in groups of 4 to the warps; when there are fewer than 9 queries
// (decode: one row of a GQA group) the warps of a group split each chunk's positions between them
// instead of idling, and merge their (max, sum, output) at the end. A lane holds head_dim/32 of
// each query's elements; the partial dot products of all the warp's positions are summed with one
// transposing butterfly (P-1 + log2(32/P) shuffles for P positions, not 5 per position), leaving
// each lane one position's score; an online softmax keeps (max, sum, output) in registers. With
// splits > 1 (few tiles: decode at small batch) each block covers one slice of the context and
// writes its partial (max, sum, output); merge_kernel combines the slices (flash-decoding). Each
// query masks positions outside [pos - window + 1, pos] itself.
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
  bool vec_kv;      // cache rows are whole 16-byte packs (head_dim * sizeof(C) % 16 == 0, aligned caches)
  float* part_acc;  // [rows * q_heads][splits][hd]  (splits > 1)
  float* part_ml;   // [rows * q_heads][splits][2]: max, sum
};

// A warp's queries: kQueriesPerWarp of them, each with its visible positions [first, last], its
// head_dim/32 elements per lane, and the online softmax state (l is this lane's share of the sum).
template <int kEpl>
struct WarpQueries {
  bool valid[kQueriesPerWarp];
  int64_t first[kQueriesPerWarp], last[kQueriesPerWarp];
  float q[kQueriesPerWarp][kEpl], acc[kQueriesPerWarp][kEpl], m[kQueriesPerWarp], l[kQueriesPerWarp];
};

// Copies `count` contiguous cache elements into shared memory as fp32: 16 bytes a load when the
// run is made of whole aligned packs (the common head dims), one element a load otherwise.
template <typename C>
__device__ __forceinline__ void stage(float* dst, const C* src, int64_t count, bool vec) {
  if (vec) {
    constexpr int N = Pack<C>::N;
    for (int64_t i = threadIdx.x; i < count / N; i += kThreads) {
      const Pack<C> pk = load_pack(src + i * N);
#pragma unroll
      for (int e = 0; e < N; ++e) dst[i * N + e] = to_float(pk.v[e]);
    }
  } else {
    for (int64_t i = threadIdx.x; i < count; i += kThreads) dst[i] = to_float(src[i]);
  }
}

// Sums each of v[0..P) over the warp with a transposing butterfly: at each step a lane keeps half
// of its values and sends the other half to its partner, so P sums cost P-1 + log2(32/P)
// shuffles instead of 5P. Returns, in every lane, the total of position lane / (32 / P).
template <int P>
__device__ __forceinline__ float transpose_sum(float (&v)[P], int lane) {
#pragma unroll
  for (int half = P / 2, off = 16; half >= 1; half /= 2, off /= 2) {
    const bool upper = lane & off;
#pragma unroll
    for (int i = 0; i < half; ++i) {
      const float send = upper ? v[i] : v[i + half];
      const float keep = upper ? v[i + half] : v[i];
      v[i] = keep + __shfl_xor_sync(0xffffffffu, send, off);
    }
  }
  float s = v[0];
#pragma unroll
  for (int off = 32 / P / 2; off >= 1; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
  return s;
}

// The block walks [s_lo, s_hi] chunk by chunk; this warp takes positions [u*P, u*P + P) of each
// chunk (P = kKvBlock / warps sharing its queries) for each of its queries.
template <typename C, int kEpl, int P>
__device__ __forceinline__ void attend(WarpQueries<kEpl>& w, float* sk, float* sv, const C* k_cache,
                                       const C* v_cache, const int32_t* table, int64_t kv_head, int64_t s_lo,
                                       int64_t s_hi, int u, const AttentionArgs& a) {
  __shared__ float sp[kWarps][kQueriesPerWarp][P];  // probabilities, shared across the warp's lanes
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t hd = a.hd;
  const int t_lane = lane / (32 / P);  // the position whose score this lane ends up holding
  const bool leader = lane % (32 / P) == 0;
  for (int64_t p0 = s_lo; p0 <= s_hi;) {
    // A chunk never crosses a cache page, so its K (and V) are one contiguous run of n rows.
    const int64_t page_end = (p0 / a.bs + 1) * a.bs;
    const int64_t n = min(min(int64_t(kKvBlock), s_hi - p0 + 1), page_end - p0);
    const int64_t base = ((int64_t(table[p0 / a.bs]) * a.kvh + kv_head) * a.bs + p0 % a.bs) * hd;
    __syncthreads();  // the previous chunk's K/V are no longer read
    stage(sk, k_cache + base, n * hd, a.vec_kv);
    stage(sv, v_cache + base, n * hd, a.vec_kv);
    __syncthreads();
    const int64_t t0 = int64_t(u) * P, t_end = min(t0 + P, n);  // this warp's positions in the chunk
#pragma unroll
    for (int j = 0; j < kQueriesPerWarp; ++j) {
      // Uniform over the warp: skip a query none of whose visible positions is in the warp's range.
      if (!w.valid[j] || t0 >= t_end || p0 + t0 > w.last[j] || p0 + t_end - 1 < w.first[j]) continue;
      float dot[P];
#pragma unroll
      for (int t = 0; t < P; ++t) {
        const float* kp = sk + (t0 + t) * hd;  // rows past n hold stale values: masked below
        dot[t] = 0.0f;
#pragma unroll
        for (int i = 0; i < kEpl; ++i)
          if (lane + 32 * i < hd) dot[t] += w.q[j][i] * kp[lane + 32 * i];
      }
      const int64_t p = p0 + t0 + t_lane;
      float s = transpose_sum<P>(dot, lane) * a.scale;
      if (a.softcap > 0.0f) s = a.softcap * tanhf(s / a.softcap);  // Gemma 2
      if (t0 + t_lane >= t_end || p < w.first[j] || p > w.last[j]) s = -INFINITY;
      float cm = s;  // the chunk's max over the warp's P positions
#pragma unroll
      for (int off = 16; off >= 32 / P; off /= 2) cm = fmaxf(cm, __shfl_xor_sync(0xffffffffu, cm, off));
      const float new_m = fmaxf(w.m[j], cm);  // finite: the range holds a visible position
      const float factor = expf(w.m[j] - new_m);  // 0 on the first visible position
      const float e = expf(s - new_m);            // 0 when masked
      w.l[j] = w.l[j] * factor + (leader ? e : 0.0f);
      if (leader) sp[warp][j][t_lane] = e;
      __syncwarp();
#pragma unroll
      for (int i = 0; i < kEpl; ++i) {
        if (lane + 32 * i >= hd) continue;
        float o = w.acc[j][i] * factor;
        for (int64_t t = 0; t < t_end - t0; ++t) o += sp[warp][j][t] * sv[(t0 + t) * hd + lane + 32 * i];
        w.acc[j][i] = o;
      }
      w.m[j] = new_m;
      // sp[warp][j] is next written in the next chunk, after its __syncthreads.
    }
    p0 += n;
  }
}

// One function: the warps' merge (two __syncthreads, then all but the first warp of a group
// return) must stay in the kernel body; the tile lookup, query load and write share its registers.
// kEpl: elements of a head each lane holds (head_dim <= 32 * kEpl).
template <typename T, typename C, int kEpl>
__global__ void __launch_bounds__(kThreads) attention_kernel(const T* q, const C* k_cache, const C* v_cache, T* out,
                                                             AttentionArgs a, StepView step) {
  extern __shared__ float smem[];
  float* sk = smem;                    // [kKvBlock][hd]
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

  // The tile's queries qi = row * heads_per_tile + head fill slots [0, nq); groups of 4 go to the
  // warps. With one or two groups (decode), 4 or 2 warps share a group and split the positions.
  const int64_t heads_here = min(a.heads_per_tile, a.group - chunk * a.heads_per_tile);
  const int64_t nq = (row_end - row0 - 1) * a.heads_per_tile + heads_here;
  const int64_t groups = (nq + kQueriesPerWarp - 1) / kQueriesPerWarp;
  const int sharing = groups == 1 ? 4 : groups == 2 ? 2 : 1;  // warps per query group (uniform)
  const int64_t qgroup = warp / sharing;
  const int u = warp % sharing;

  WarpQueries<kEpl> w;
  int64_t q_row[kQueriesPerWarp], q_head[kQueriesPerWarp];
#pragma unroll
  for (int j = 0; j < kQueriesPerWarp; ++j) {
    const int64_t qi = qgroup * kQueriesPerWarp + j;
    const int64_t in_group = chunk * a.heads_per_tile + qi % a.heads_per_tile;
    q_row[j] = row0 + qi / a.heads_per_tile;
    q_head[j] = kv_head * a.group + in_group;
    w.valid[j] = qi < nq && in_group < a.group;
    w.last[j] = first_row.pos + (q_row[j] - row0);
    w.first[j] = a.window > 0 ? max(int64_t(0), w.last[j] - a.window + 1) : 0;
    w.m[j] = -INFINITY;
    w.l[j] = 0.0f;
#pragma unroll
    for (int i = 0; i < kEpl; ++i) {
      const int64_t d = lane + 32 * i;
      w.q[j][i] = w.valid[j] && d < hd ? to_float(q[q_row[j] * a.q_stride + q_head[j] * hd + d]) : 0.0f;
      w.acc[j][i] = 0.0f;
    }
  }

  if (sharing == 4)
    attend<C, kEpl, kKvBlock / 4>(w, sk, sv, k_cache, v_cache, table, kv_head, s_lo, s_hi, u, a);
  else if (sharing == 2)
    attend<C, kEpl, kKvBlock / 2>(w, sk, sv, k_cache, v_cache, table, kv_head, s_lo, s_hi, u, a);
  else
    attend<C, kEpl, kKvBlock>(w, sk, sv, k_cache, v_cache, table, kv_head, s_lo, s_hi, u, a);
#pragma unroll
  for (int j = 0; j < kQueriesPerWarp; ++j)
    if (w.valid[j]) w.l[j] = warp_sum(w.l[j]);  // valid[j] is uniform over the warp

  // Warps that shared a query group merge their (max, sum, output) through shared memory (the
  // K/V buffers, 2 * kKvBlock * hd floats, hold the kWarps * 4 * (hd + 2) floats needed).
  if (sharing > 1) {
    float* wml = smem;                                      // [kWarps][4][2]: max, sum
    float* wacc = smem + kWarps * kQueriesPerWarp * 2;      // [kWarps][4][hd]
    __syncthreads();  // the last chunk's K/V are no longer read
#pragma unroll
    for (int j = 0; j < kQueriesPerWarp; ++j) {
      if (!w.valid[j]) continue;
      const int64_t slot = warp * kQueriesPerWarp + j;
      if (lane == 0) wml[slot * 2] = w.m[j], wml[slot * 2 + 1] = w.l[j];
#pragma unroll
      for (int i = 0; i < kEpl; ++i)
        if (lane + 32 * i < hd) wacc[slot * hd + lane + 32 * i] = w.acc[j][i];
    }
    __syncthreads();
    if (u != 0) return;  // the group's first warp writes the result
#pragma unroll
    for (int j = 0; j < kQueriesPerWarp; ++j) {
      if (!w.valid[j]) continue;
      float mx = -INFINITY;
      for (int o = 0; o < sharing; ++o) mx = fmaxf(mx, wml[((warp + o) * kQueriesPerWarp + j) * 2]);
      float l = 0.0f;
#pragma unroll
      for (int i = 0; i < kEpl; ++i) w.acc[j][i] = 0.0f;
      for (int o = 0; o < sharing; ++o) {
        const int64_t slot = (warp + o) * kQueriesPerWarp + j;
        const float mo = wml[slot * 2];
        if (mo == -INFINITY) continue;  // that warp saw no visible position
        const float f = expf(mo - mx);
        l += wml[slot * 2 + 1] * f;
#pragma unroll
        for (int i = 0; i < kEpl; ++i)
          if (lane + 32 * i < hd) w.acc[j][i] += wacc[slot * hd + lane + 32 * i] * f;
      }
      w.m[j] = mx;
      w.l[j] = l;
    }
  }

#pragma unroll
  for (int j = 0; j < kQueriesPerWarp; ++j) {
    if (!w.valid[j]) continue;
    if (a.splits == 1) {
      T* o = out + q_row[j] * (a.q_heads * hd) + q_head[j] * hd;
      const float inv = 1.0f / w.l[j];
#pragma unroll
      for (int i = 0; i < kEpl; ++i)
        if (lane + 32 * i < hd) o[lane + 32 * i] = from_float<T>(w.acc[j][i] * inv);
    } else {
      const int64_t idx = (q_row[j] * a.q_heads + q_head[j]) * a.splits + blockIdx.z;
#pragma unroll
      for (int i = 0; i < kEpl; ++i)
        if (lane + 32 * i < hd) a.part_acc[idx * hd + lane + 32 * i] = w.acc[j][i];
      if (lane == 0) {
        a.part_ml[idx * 2] = w.m[j];
        a.part_ml[idx * 2 + 1] = w.l[j];
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
  dispatch_act(kv.dtype, "paged_attention", "KV cache", [&](auto ct) {
    using C = typename decltype(ct)::type;
    a.vec_kv = packable<C>(kv.head_dim, k_cache.data, v_cache.data);
  });
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
