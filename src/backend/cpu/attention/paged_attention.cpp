#include "backend/cpu/attention/paged_attention.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/cpu/attention/decode_attention_tile.h"
#include "backend/cpu/cpu_exp_ops.h"
#include "backend/cpu/gemm/gemm.h"
#include "common/error.h"

namespace tpbatch::cpu {
namespace {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }
// bf16 -> fp32 is exact (the top 16 bits); inline here so the widening loops vectorise (dtype.cpp's
// bf16_to_f32 is out of line).
inline float widen(const float* p, int64_t i) { return p[i]; }
inline float widen(const uint16_t* p, int64_t i) { return std::bit_cast<float>(static_cast<uint32_t>(p[i]) << 16); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) { p[i] = f32_to_bf16(v); }

// First cache position row `last` may see (sliding window) and the softmax scale.
inline int64_t first_visible(const KvLayout& kv, int64_t last) {
  return kv.window > 0 ? std::max<int64_t>(0, last - kv.window + 1) : 0;
}
inline float softmax_scale(const KvLayout& kv) {
  return kv.scale > 0.0f ? kv.scale : 1.0f / std::sqrt(static_cast<float>(kv.head_dim));
}

// Writes this step's keys and values into each sequence's blocks (before anything attends: rows of a
// prefill chunk see each other).
template <typename C>
void append_kv(const float* k, const float* v, int64_t kv_stride, C* k_cache, C* v_cache, const KvLayout& kv,
               const AttentionSeq* seqs, int64_t num_seqs) {
  const int64_t hd = kv.head_dim, bs = kv.block_size, kvh = kv.kv_heads;
  for (int64_t si = 0; si < num_seqs; ++si) {
    const AttentionSeq& s = seqs[si];
    for (int64_t r = 0; r < s.num_rows; ++r) {
      const int64_t row = s.row_begin + r, pos = s.pos_begin + r;
      const int64_t block = s.blocks[pos / bs];
      for (int64_t h = 0; h < kvh; ++h) {
        const int64_t at = ((block * kvh + h) * bs + pos % bs) * hd;
        for (int64_t d = 0; d < hd; ++d) {
          store(k_cache, at + d, k[row * kv_stride + h * hd + d]);
          store(v_cache, at + d, v[row * kv_stride + h * hd + d]);
        }
      }
    }
  }
}

// ---- reference: one query row of one head at a time ----

// (The pre-tiling hot loop, kept as it was, so the benchmark's "old" is the real old.)
template <typename C>
__attribute__((target_clones("avx512f", "arch=haswell", "default")))
void attend_one(const float* qh, const C* k_cache, const C* v_cache, const KvLayout& kv, int64_t kv_head,
                const int32_t* blocks, int64_t first, int64_t last, float scale, float* out) {
  const int64_t hd = kv.head_dim, bs = kv.block_size, kvh = kv.kv_heads;
  thread_local std::vector<float> scores, acc;
  scores.resize(static_cast<size_t>(last + 1));
  acc.assign(static_cast<size_t>(hd), 0.0f);
  float* sc = scores.data();
  float* ac = acc.data();
  auto slot = [&](const C* cache, int64_t pos) {
    return cache + ((static_cast<int64_t>(blocks[pos / bs]) * kvh + kv_head) * bs + pos % bs) * hd;
  };
  float mx = -INFINITY;
  for (int64_t p = first; p <= last; ++p) {
    const C* kp = slot(k_cache, p);
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < hd; ++d) dot += qh[d] * load(kp, d);
    float score = dot * scale;
    if (kv.softcap > 0.0f) score = kv.softcap * std::tanh(score / kv.softcap);  // Gemma 2
    sc[p] = score;
    mx = std::max(mx, sc[p]);
  }
  float denom = 0.0f;
  for (int64_t p = first; p <= last; ++p) {
    sc[p] = std::exp(sc[p] - mx);
    denom += sc[p];
  }
  for (int64_t p = first; p <= last; ++p) {
    const C* vp = slot(v_cache, p);
    const float wgt = sc[p];
#pragma omp simd
    for (int64_t d = 0; d < hd; ++d) ac[d] += wgt * load(vp, d);
  }
  const float inv = 1.0f / denom;
  for (int64_t d = 0; d < hd; ++d) out[d] = ac[d] * inv;
}

template <typename C>
void reference(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, C* k_cache,
               C* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs, int64_t num_seqs,
               float* out) {
  append_kv(k, v, kv_stride, k_cache, v_cache, kv, seqs, num_seqs);
  const int64_t hd = kv.head_dim, group = q_heads / kv.kv_heads;
  std::vector<std::pair<int64_t, int64_t>> work;  // (sequence, row within it)
  for (int64_t si = 0; si < num_seqs; ++si)
    for (int64_t r = 0; r < seqs[si].num_rows; ++r) work.emplace_back(si, r);
  const int64_t items = static_cast<int64_t>(work.size()) * q_heads;
#pragma omp parallel for schedule(dynamic, 4) if (items > 8)
  for (int64_t item = 0; item < items; ++item) {
    const auto [si, r] = work[item / q_heads];
    const int64_t h = item % q_heads;
    const AttentionSeq& s = seqs[si];
    const int64_t row = s.row_begin + r, last = s.pos_begin + r;
    attend_one<C>(q + row * q_stride + h * hd, k_cache, v_cache, kv, h / group, s.blocks, first_visible(kv, last),
                  last, softmax_scale(kv), out + row * (q_heads * hd) + h * hd);
  }
}

// ---- tiled (flash-style) ----

// Eight floats as one value (GCC's vector extension): a register of the target each wrapper
// below compiles for (one ymm for AVX2 / AVX-512, two xmm portably), so the tile's accumulators
// stay in registers, which float arrays did not.
// Always inlined, so no call passes a V8 between code of different targets (whose calling
// conventions for it differ: -Wpsabi's warning, silenced for this file for that reason; GCC
// reports it where the templates are instantiated, at the end of the file).
typedef float V8 __attribute__((vector_size(32)));
#pragma GCC diagnostic ignored "-Wpsabi"
__attribute__((always_inline)) inline V8 load8(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void store8(float* p, V8 v) { std::memcpy(p, &v, sizeof v); }
__attribute__((always_inline)) inline V8 splat8(float x) { return V8{x, x, x, x, x, x, x, x}; }

// Query rows of one tile: at most kTileRows positions of one sequence; times the GQA group's heads.
constexpr int64_t kTileRows = 16;

// Per-thread scratch of one tile: scaled queries Q[m][hd], the K block transposed Kt[hd][bs] (scores
// of one query against the block are then bs-wide FMAs, no horizontal sums), the V block widened to
// fp32 (bf16 cache), scores P[m][bs], running max / sum per query, accumulators O[m][hd].
struct TileScratch {
  std::vector<float> q, kt, vf, p, mx, sum, acc;
};

// One function: the online softmax over K/V blocks keeps its running max, sums and tile scratch live across phases.
// One tile: query rows [r0, r1) of sequence s, heads [kv_head * group, (kv_head + 1) * group).
// BS / HD > 0 fix the block size / head dim at compile time (the common shapes); 0 = read from kv.
// Inlined into one wrapper per instruction set (attend_tile below).
template <typename C, int BS, int HD>
__attribute__((always_inline)) inline void attend_tile_body(const float* q, int64_t q_stride, const C* k_cache, const C* v_cache, const KvLayout& kv,
                 int64_t q_heads, const AttentionSeq& s, int64_t kv_head, int64_t r0, int64_t r1, float* out,
                 TileScratch& t) {
  const int64_t bs = BS > 0 ? BS : kv.block_size, hd = HD > 0 ? HD : kv.head_dim, kvh = kv.kv_heads;
  const int64_t group = q_heads / kvh, rows = r1 - r0, m = rows * group;
  const float scale = softmax_scale(kv), cap = kv.softcap;
  t.q.resize(m * hd);
  t.kt.resize(hd * bs);
  t.vf.resize(bs * hd);
  t.p.resize(m * bs);
  t.mx.assign(m, -INFINITY);
  t.sum.assign(m, 0.0f);
  t.acc.assign(m * hd, 0.0f);
  float* __restrict Q = t.q.data();
  float* __restrict Kt = t.kt.data();
  float* __restrict P = t.p.data();
  float* __restrict O = t.acc.data();
  // Query i = (row r, head g) is tile entry i = r * group + g: position s.pos_begin + r0 + r.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < group; ++g) {
      const float* src = q + (s.row_begin + r0 + r) * q_stride + (kv_head * group + g) * hd;
      float* dst = Q + (r * group + g) * hd;
#pragma omp simd
      for (int64_t d = 0; d < hd; ++d) dst[d] = src[d] * scale;
    }
  const int64_t last_pos = s.pos_begin + r1 - 1;
  const int64_t first_pos = first_visible(kv, s.pos_begin + r0);
  for (int64_t b = first_pos / bs; b <= last_pos / bs; ++b) {
    const int64_t base = b * bs;
    const int64_t at = (static_cast<int64_t>(s.blocks[b]) * kvh + kv_head) * bs * hd;
    const C* kb = k_cache + at;
    const C* vb = v_cache + at;
    // The block once for the whole tile: K transposed, V as fp32.
    for (int64_t j = 0; j < bs; ++j)
      for (int64_t d = 0; d < hd; ++d) Kt[d * bs + j] = widen(kb, j * hd + d);
    const float* V;
    if constexpr (std::is_same_v<C, float>) {
      V = vb;
    } else {
      float* vf = t.vf.data();
#pragma omp simd
      for (int64_t e = 0; e < bs * hd; ++e) vf[e] = widen(vb, e);
      V = vf;
    }
    // Rows that see some of this block: a contiguous range (first and last visible grow with the row).
    int64_t ra = rows, rb = -1;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t last = s.pos_begin + r0 + r;
      if (last >= base && first_visible(kv, last) < base + bs) ra = std::min(ra, r), rb = r;
    }
    // Scores of all their queries against the whole block (masked below), four queries at a time so
    // the FMA chains over head_dim are independent.
    const int64_t ia = ra * group, ib = (rb + 1) * group;
    int64_t i = ia;
    if constexpr (BS == 16) {  // eight 8-lane accumulators: four queries x the block's 16 keys
      for (; i + 4 <= ib; i += 4) {
        const float *q0 = Q + i * hd, *q1 = q0 + hd, *q2 = q1 + hd, *q3 = q2 + hd;
        V8 a00 = {}, a01 = {}, a10 = {}, a11 = {}, a20 = {}, a21 = {}, a30 = {}, a31 = {};
        for (int64_t d = 0; d < hd; ++d) {
          const V8 k0 = load8(Kt + d * 16), k1 = load8(Kt + d * 16 + 8);
          const V8 b0 = splat8(q0[d]), b1 = splat8(q1[d]), b2 = splat8(q2[d]), b3 = splat8(q3[d]);
          a00 += b0 * k0, a01 += b0 * k1, a10 += b1 * k0, a11 += b1 * k1;
          a20 += b2 * k0, a21 += b2 * k1, a30 += b3 * k0, a31 += b3 * k1;
        }
        store8(P + i * 16, a00), store8(P + i * 16 + 8, a01), store8(P + (i + 1) * 16, a10);
        store8(P + (i + 1) * 16 + 8, a11), store8(P + (i + 2) * 16, a20), store8(P + (i + 2) * 16 + 8, a21);
        store8(P + (i + 3) * 16, a30), store8(P + (i + 3) * 16 + 8, a31);
      }
    }
    for (; i < ib; ++i) {
      const float* qi = Q + i * hd;
      float* __restrict pi = P + i * bs;
#pragma omp simd
      for (int64_t j = 0; j < bs; ++j) pi[j] = 0.0f;
      for (int64_t d = 0; d < hd; ++d) {
        const float qd = qi[d];
        const float* kd = Kt + d * bs;
#pragma omp simd
        for (int64_t j = 0; j < bs; ++j) pi[j] += qd * kd[j];
      }
    }
    for (int64_t r = ra; r <= rb; ++r) {
      const int64_t last = s.pos_begin + r0 + r, first = first_visible(kv, last);
      const int64_t lo = std::max<int64_t>(first - base, 0), hi = std::min<int64_t>(last - base, bs - 1);
      for (int64_t g = 0; g < group; ++g) {
        const int64_t i = r * group + g;
        float* __restrict pi = P + i * bs;
        const float* scp = pi;
        if (cap > 0.0f)
          for (int64_t j = lo; j <= hi; ++j) pi[j] = cap * std::tanh(scp[j] / cap);  // Gemma 2
        float bmax = -INFINITY;
#pragma omp simd reduction(max : bmax)
        for (int64_t j = lo; j <= hi; ++j) bmax = std::max(bmax, pi[j]);
        const float mnew = std::max(t.mx[i], bmax);
        const float corr = std::exp(t.mx[i] - mnew);  // 0 on the first visible block
        // The block's weights: eight lanes of exp at a time (vector_exp.h's error, 2e-7 relative).
        const float psum = exp_shifted_in_place(pi + lo, hi - lo + 1, mnew);
        t.mx[i] = mnew;
        t.sum[i] = t.sum[i] * corr + psum;
        float* __restrict oi = O + i * hd;
        if constexpr (HD > 0 && HD % 64 == 0) {  // 64 columns of the row's output at a time, in eight registers
          const V8 c = splat8(corr);
          for (int64_t d0 = 0; d0 < HD; d0 += 64) {
            float* o = oi + d0;
            V8 o0 = load8(o) * c, o1 = load8(o + 8) * c, o2 = load8(o + 16) * c, o3 = load8(o + 24) * c;
            V8 o4 = load8(o + 32) * c, o5 = load8(o + 40) * c, o6 = load8(o + 48) * c, o7 = load8(o + 56) * c;
            for (int64_t j = lo; j <= hi; ++j) {
              const V8 w = splat8(pi[j]);
              const float* v = V + j * HD + d0;
              o0 += w * load8(v), o1 += w * load8(v + 8), o2 += w * load8(v + 16), o3 += w * load8(v + 24);
              o4 += w * load8(v + 32), o5 += w * load8(v + 40), o6 += w * load8(v + 48), o7 += w * load8(v + 56);
            }
            store8(o, o0), store8(o + 8, o1), store8(o + 16, o2), store8(o + 24, o3);
            store8(o + 32, o4), store8(o + 40, o5), store8(o + 48, o6), store8(o + 56, o7);
          }
        } else {
          if (corr != 1.0f) {
#pragma omp simd
            for (int64_t d = 0; d < hd; ++d) oi[d] *= corr;
          }
          for (int64_t j = lo; j <= hi; ++j) {
            const float w = pi[j];
            const float* vj = V + j * hd;
#pragma omp simd
            for (int64_t d = 0; d < hd; ++d) oi[d] += w * vj[d];
          }
        }
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < group; ++g) {
      const int64_t i = r * group + g;
      const float inv = 1.0f / t.sum[i];
      float* dst = out + (s.row_begin + r0 + r) * (q_heads * hd) + (kv_head * group + g) * hd;
#pragma omp simd
      for (int64_t d = 0; d < hd; ++d) dst[d] = O[i * hd + d] * inv;
    }
}

// The tile kernel compiled for AVX-512, for AVX2 + FMA and portably, picked by the CPU's kernel
// family as the GEMMs detect it (gemm_isa). (target_clones was not used: its resolver picked the
// portable clone on an AVX2 Zen 3, whose features __builtin_cpu_supports reports, and the tiles
// ran SSE2 code.)
#define TPBATCH_TILE_ARGS                                                                                     \
  const float *q, int64_t q_stride, const C *k_cache, const C *v_cache, const KvLayout &kv, int64_t q_heads, \
      const AttentionSeq &s, int64_t kv_head, int64_t r0, int64_t r1, float *out, TileScratch &t
#define TPBATCH_TILE_CALL attend_tile_body<C, BS, HD>(q, q_stride, k_cache, v_cache, kv, q_heads, s, kv_head, r0, r1, out, t)

#if defined(__x86_64__)
template <typename C, int BS, int HD>
__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma"))) void attend_tile_avx512(TPBATCH_TILE_ARGS) {
  TPBATCH_TILE_CALL;
}
template <typename C, int BS, int HD>
__attribute__((target("avx2,fma"))) void attend_tile_avx2(TPBATCH_TILE_ARGS) {
  TPBATCH_TILE_CALL;
}
#endif
template <typename C, int BS, int HD>
void attend_tile_portable(TPBATCH_TILE_ARGS) {
  TPBATCH_TILE_CALL;
}

template <typename C, int BS, int HD>
void attend_tile(TPBATCH_TILE_ARGS) {
#if defined(__x86_64__)
  const GemmIsa isa = gemm_isa();
  if (isa >= GemmIsa::Avx512)
    return attend_tile_avx512<C, BS, HD>(q, q_stride, k_cache, v_cache, kv, q_heads, s, kv_head, r0, r1, out, t);
  if (isa == GemmIsa::Avx2Fma)
    return attend_tile_avx2<C, BS, HD>(q, q_stride, k_cache, v_cache, kv, q_heads, s, kv_head, r0, r1, out, t);
#endif
  attend_tile_portable<C, BS, HD>(q, q_stride, k_cache, v_cache, kv, q_heads, s, kv_head, r0, r1, out, t);
}
#undef TPBATCH_TILE_ARGS
#undef TPBATCH_TILE_CALL

template <typename C>
void tiled(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, C* k_cache,
           C* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs, int64_t num_seqs, float* out) {
  append_kv(k, v, kv_stride, k_cache, v_cache, kv, seqs, num_seqs);
  const int64_t kvh = kv.kv_heads, group = q_heads / kvh;
  // Rows per tile: enough queries (rows x group) to reuse each block, few enough to stay in L1/L2.
  const int64_t tile_rows = std::max<int64_t>(1, std::min<int64_t>(kTileRows, 64 / group));
  struct Item {
    int64_t seq, kv_head, kv_head_end, r0, r1, cost;
  };
  // Few queries (decode rows): the AVX2 kernel that reads K rows as they are (no transpose).
  const bool decode_kernel = detail::decode_kernel_enabled();
  auto is_decode = [&](int64_t r0, int64_t r1) {
    return decode_kernel && (r1 - r0) * group <= detail::kDecodeTileMaxQueries;
  };
  // Decode tiles take all kv heads at once (each block's K, and V, is then one contiguous run: at the
  // 125M shape 16 KiB instead of four scattered 4 KiB pieces, which a core reads at about half the
  // rate) when there are enough of them to keep the team busy; else one kv head each.
  int64_t decode_tiles = 0;
  for (int64_t si = 0; si < num_seqs; ++si)
    for (int64_t r0 = 0; r0 < seqs[si].num_rows; r0 += tile_rows)
      decode_tiles += is_decode(r0, std::min(seqs[si].num_rows, r0 + tile_rows));
  const int threads = omp_get_max_threads();
  const int64_t decode_heads = threads == 1 || decode_tiles >= 4 * threads ? kvh : 1;
  std::vector<Item> work;
  for (int64_t si = 0; si < num_seqs; ++si)
    for (int64_t r0 = 0; r0 < seqs[si].num_rows; r0 += tile_rows) {
      const int64_t r1 = std::min(seqs[si].num_rows, r0 + tile_rows);
      const int64_t last = seqs[si].pos_begin + r1 - 1;
      const int64_t cost = (last - first_visible(kv, seqs[si].pos_begin + r0) + 1) * (r1 - r0);
      const int64_t heads = is_decode(r0, r1) ? decode_heads : 1;
      for (int64_t h = 0; h < kvh; h += heads) work.push_back({si, h, h + heads, r0, r1, cost * heads});
    }
  // Longest tiles first, so the dynamic schedule does not end on one long tile.
  std::stable_sort(work.begin(), work.end(), [](const Item& a, const Item& b) { return a.cost > b.cost; });
  const int64_t items = static_cast<int64_t>(work.size());
  const bool fixed = kv.block_size == 16 && (kv.head_dim == 64 || kv.head_dim == 128);
  const float scale = softmax_scale(kv);
#pragma omp parallel if (items > 1)
  {
    TileScratch scratch;
#pragma omp for schedule(dynamic, 1)
    for (int64_t w = 0; w < items; ++w) {
      const Item& it = work[w];
      const AttentionSeq& s = seqs[it.seq];
      if (is_decode(it.r0, it.r1))
        detail::attend_decode_tile(q, q_stride, k_cache, v_cache, kv, q_heads, s, it.kv_head, it.kv_head_end, it.r0,
                                   it.r1, scale, out);
      else if (fixed && kv.head_dim == 64)
        attend_tile<C, 16, 64>(q, q_stride, k_cache, v_cache, kv, q_heads, s, it.kv_head, it.r0, it.r1, out, scratch);
      else if (fixed)
        attend_tile<C, 16, 128>(q, q_stride, k_cache, v_cache, kv, q_heads, s, it.kv_head, it.r0, it.r1, out,
                                scratch);
      else
        attend_tile<C, 0, 0>(q, q_stride, k_cache, v_cache, kv, q_heads, s, it.kv_head, it.r0, it.r1, out, scratch);
    }
  }
}

void check_layout(const KvLayout& kv, int64_t q_heads) {
  if (kv.kv_heads <= 0 || q_heads % kv.kv_heads != 0)
    throw Error("CPU backend: paged_attention: " + std::to_string(q_heads) + " q heads are not a multiple of " +
                std::to_string(kv.kv_heads) + " kv heads");
  if (kv.block_size > 256)
    throw Error("CPU backend: paged_attention: KV block size " + std::to_string(kv.block_size) +
                " is over 256 positions");
}

template <typename F>
void dispatch(const KvLayout& kv, void* k_cache, void* v_cache, F&& f) {
  switch (kv.dtype) {
    case DType::F32:
      f(static_cast<float*>(k_cache), static_cast<float*>(v_cache));
      return;
    case DType::BF16:
      f(static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache));
      return;
    default:
      throw Error(std::string("CPU backend: a ") + dtype_name(kv.dtype) + " KV cache is not supported (F32 or BF16)");
  }
}

}  // namespace

void paged_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                     void* k_cache, void* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs,
                     int64_t num_seqs, float* out) {
  check_layout(kv, q_heads);
  dispatch(kv, k_cache, v_cache, [&](auto* kc, auto* vc) {
    tiled(q, q_stride, k, v, kv_stride, kc, vc, kv, q_heads, seqs, num_seqs, out);
  });
}

void paged_attention_reference(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                               void* k_cache, void* v_cache, const KvLayout& kv, int64_t q_heads,
                               const AttentionSeq* seqs, int64_t num_seqs, float* out) {
  check_layout(kv, q_heads);
  dispatch(kv, k_cache, v_cache, [&](auto* kc, auto* vc) {
    reference(q, q_stride, k, v, kv_stride, kc, vc, kv, q_heads, seqs, num_seqs, out);
  });
}

}  // namespace tpbatch::cpu
