// The AVX2 + FMA decode attention tile (see decode_attention_tile.h). The project compiles for
// x86-64-v2, so this file raises the target with a pragma for its kernels only; every standard header
// and every function that instantiates a standard template (the scratch vector) comes BEFORE the
// pragma, so the linker can never pick an AVX2 copy of a shared inline function for the whole program.
//
// Tried and rejected (125M shape, decode, 1 thread, benchmarks/attention_bench.cpp, load ~3-4):
//  - software prefetch (_mm_prefetch T0 / T1) of the blocks 1, 2 or 4 ahead: with one kv head per
//    tile (scattered 4 KiB runs) dist 4 seemed to help 32 seqs @1024 by ~20%, but with all kv heads per
//    tile (16 KiB runs, what decode batches now get) no setting beat none beyond the run-to-run noise
//    (+-30% on this shared machine), so there is none.
//  - one kv head per tile for every decode batch: a core reads scattered 4 KiB runs at ~4-6 GB/s
//    against ~10 GB/s for 16 KiB ones (measured with a plain sum over shuffled runs), hence
//    paged_attention.cpp gives a decode tile all kv heads when there are enough tiles for the team.
#include "backend/cpu/attention/decode_attention_tile.h"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_has_avx2_fma.h"
#include "common/error.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tpbatch::cpu::detail {
namespace {

std::atomic<bool> g_decode_kernel_on{true};

// Per-thread scratch of one tile; grows, never shrinks.
float* tile_scratch(size_t floats) {
  thread_local std::vector<float> buf;
  if (buf.size() < floats) buf.resize(floats);
  return buf.data();
}

}  // namespace

bool decode_kernel_enabled() {
  return cpu_has_avx2_fma() && g_decode_kernel_on.load(std::memory_order_relaxed);
}

void set_decode_kernel_enabled(bool on) { g_decode_kernel_on.store(on, std::memory_order_relaxed); }

}  // namespace tpbatch::cpu::detail

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define TPBATCH_VEXP_AVX2 1
#include "backend/cpu/vector_exp.h"

namespace tpbatch::cpu::detail {
namespace {

// Positions per online-softmax update: whole blocks, at least one.
constexpr int64_t kDecodeChunkPositions = 64;

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Eight cache elements as fp32 (bf16 is the top half of an fp32: zero-extend, shift by 16), and one.
static inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
static inline __m256 load8(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
static inline float load1(const float* p) { return *p; }
static inline float load1(const uint16_t* p) {
  const uint32_t bits = static_cast<uint32_t>(*p) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

static inline float hsum(__m256 a) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
// The four sums of a0..a3, in order.
static inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}
static inline float hmax(__m256 a) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 t = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
}

// Scores of NQ queries Q[i][hd] against K rows [j0, j1) of one block (rows of hd): S[i * ss + j].
// Four positions at a time: NQ x 4 ymm accumulators (12 at NQ = 3, plus 4 K registers: the 16 ymm).
template <int NQ, typename C>
static inline void score_rows(const float* Q, int64_t hd, const C* kb, int64_t j0, int64_t j1, float* S, int64_t ss) {
  const int64_t hd8 = hd & ~int64_t(7);
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    const C* k0 = kb + j * hd;
    const C *k1 = k0 + hd, *k2 = k1 + hd, *k3 = k2 + hd;
    __m256 acc[NQ][4];
    for (int i = 0; i < NQ; ++i)
      for (int c = 0; c < 4; ++c) acc[i][c] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd8; d += 8) {
      const __m256 x0 = load8(k0 + d), x1 = load8(k1 + d), x2 = load8(k2 + d), x3 = load8(k3 + d);
      for (int i = 0; i < NQ; ++i) {
        const __m256 qv = _mm256_loadu_ps(Q + i * hd + d);
        acc[i][0] = _mm256_fmadd_ps(qv, x0, acc[i][0]);
        acc[i][1] = _mm256_fmadd_ps(qv, x1, acc[i][1]);
        acc[i][2] = _mm256_fmadd_ps(qv, x2, acc[i][2]);
        acc[i][3] = _mm256_fmadd_ps(qv, x3, acc[i][3]);
      }
    }
    for (int i = 0; i < NQ; ++i) {
      __m128 s4 = hsum4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
      if (hd8 < hd) {  // head_dim not a multiple of 8
        float t[4] = {0, 0, 0, 0};
        for (int64_t d = hd8; d < hd; ++d) {
          const float qd = Q[i * hd + d];
          t[0] += qd * load1(k0 + d), t[1] += qd * load1(k1 + d), t[2] += qd * load1(k2 + d), t[3] += qd * load1(k3 + d);
        }
        s4 = _mm_add_ps(s4, _mm_loadu_ps(t));
      }
      _mm_storeu_ps(S + i * ss + j, s4);
    }
  }
  for (; j < j1; ++j) {
    const C* kr = kb + j * hd;
    __m256 acc[NQ];
    for (int i = 0; i < NQ; ++i) acc[i] = _mm256_setzero_ps();
    for (int64_t d = 0; d < hd8; d += 8) {
      const __m256 x = load8(kr + d);
      for (int i = 0; i < NQ; ++i) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(Q + i * hd + d), x, acc[i]);
    }
    for (int i = 0; i < NQ; ++i) {
      float s = hsum(acc[i]);
      for (int64_t d = hd8; d < hd; ++d) s += Q[i * hd + d] * load1(kr + d);
      S[i * ss + j] = s;
    }
  }
}

// O[i][:] += sum over j in [j0, j1) of P[i * ss + j] * V[j][:], for NQ <= 4 queries: each V row is
// loaded once for all of them; 16 dims at a time (2 x NQ accumulators).
template <int NQ, typename C>
static inline void accumulate_rows(const float* P, int64_t ss, const C* vb, int64_t hd, int64_t j0, int64_t j1,
                                   float* O) {
  const int64_t hd8 = hd & ~int64_t(7);
  int64_t d = 0;
  for (; d + 16 <= hd8; d += 16) {
    __m256 a[NQ][2];
    for (int i = 0; i < NQ; ++i) a[i][0] = _mm256_loadu_ps(O + i * hd + d), a[i][1] = _mm256_loadu_ps(O + i * hd + d + 8);
    for (int64_t j = j0; j < j1; ++j) {
      const C* vr = vb + j * hd + d;
      const __m256 v0 = load8(vr), v1 = load8(vr + 8);
      for (int i = 0; i < NQ; ++i) {
        const __m256 w = _mm256_broadcast_ss(P + i * ss + j);
        a[i][0] = _mm256_fmadd_ps(w, v0, a[i][0]);
        a[i][1] = _mm256_fmadd_ps(w, v1, a[i][1]);
      }
    }
    for (int i = 0; i < NQ; ++i) _mm256_storeu_ps(O + i * hd + d, a[i][0]), _mm256_storeu_ps(O + i * hd + d + 8, a[i][1]);
  }
  for (; d < hd8; d += 8) {
    __m256 a[NQ];
    for (int i = 0; i < NQ; ++i) a[i] = _mm256_loadu_ps(O + i * hd + d);
    for (int64_t j = j0; j < j1; ++j) {
      const __m256 v0 = load8(vb + j * hd + d);
      for (int i = 0; i < NQ; ++i) a[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(P + i * ss + j), v0, a[i]);
    }
    for (int i = 0; i < NQ; ++i) _mm256_storeu_ps(O + i * hd + d, a[i]);
  }
  for (; d < hd; ++d)
    for (int i = 0; i < NQ; ++i) {
      float acc = O[i * hd + d];
      for (int64_t j = j0; j < j1; ++j) acc += P[i * ss + j] * load1(vb + j * hd + d);
      O[i * hd + d] = acc;
    }
}

template <typename C>
static inline void score_queries(const float* Q, int64_t m, int64_t hd, const C* kb, int64_t j0, int64_t j1, float* S,
                                 int64_t ss) {
  int64_t i = 0;
  for (; i + 3 <= m; i += 3) score_rows<3>(Q + i * hd, hd, kb, j0, j1, S + i * ss, ss);
  if (m - i == 2) score_rows<2>(Q + i * hd, hd, kb, j0, j1, S + i * ss, ss);
  if (m - i == 1) score_rows<1>(Q + i * hd, hd, kb, j0, j1, S + i * ss, ss);
}

template <typename C>
static inline void accumulate_queries(const float* P, int64_t m, int64_t ss, const C* vb, int64_t hd, int64_t j0,
                                      int64_t j1, float* O) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) accumulate_rows<4>(P + i * ss, ss, vb, hd, j0, j1, O + i * hd);
  switch (m - i) {
    case 3: accumulate_rows<3>(P + i * ss, ss, vb, hd, j0, j1, O + i * hd); break;
    case 2: accumulate_rows<2>(P + i * ss, ss, vb, hd, j0, j1, O + i * hd); break;
    case 1: accumulate_rows<1>(P + i * ss, ss, vb, hd, j0, j1, O + i * hd); break;
    default: break;
  }
}

// Max of x[0, n), n >= 1.
static inline float max_of(const float* x, int64_t n) {
  int64_t p = 0;
  float mx = -INFINITY;
  if (n >= 8) {
    __m256 v = _mm256_loadu_ps(x);
    for (p = 8; p + 8 <= n; p += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(x + p));
    mx = hmax(v);
  }
  for (; p < n; ++p) mx = x[p] > mx ? x[p] : mx;
  return mx;
}

template <typename C>
void decode_tile(const float* q, int64_t q_stride, const C* k_cache, const C* v_cache, const KvLayout& kv,
                 int64_t q_heads, const AttentionSeq& s, int64_t h0, int64_t h1, int64_t r0, int64_t r1, float scale,
                 float* out) {
  const int64_t bs = kv.block_size, hd = kv.head_dim, kvh = kv.kv_heads, window = kv.window;
  const int64_t group = q_heads / kvh, rows = r1 - r0, mh = rows * group, nh = h1 - h0, m = nh * mh;
  const float cap = kv.softcap;
  // Chunk: nb whole blocks; S holds one chunk's scores per query (row stride cw).
  const int64_t nb = max64(1, kDecodeChunkPositions / bs), cw = nb * bs;
  float* Q = tile_scratch(static_cast<size_t>(m * hd * 2 + m * cw + 2 * m));
  float* O = Q + m * hd;
  float* S = O + m * hd;
  float* mx = S + m * cw;
  float* sum = mx + m;
  // Query i = (kv head h0 + x, row r, head g of its group) is tile entry i = x * mh + r * group + g, at
  // position s.pos_begin + r0 + r.
  for (int64_t x = 0; x < nh; ++x)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < group; ++g) {
        const float* src = q + (s.row_begin + r0 + r) * q_stride + ((h0 + x) * group + g) * hd;
        float* dst = Q + (x * mh + r * group + g) * hd;
        for (int64_t d = 0; d < hd; ++d) dst[d] = src[d] * scale;
      }
  for (int64_t e = 0; e < m * hd; ++e) O[e] = 0.0f;
  for (int64_t i = 0; i < m; ++i) mx[i] = -INFINITY, sum[i] = 0.0f;
  auto first_visible = [&](int64_t last) { return window > 0 ? max64(0, last - window + 1) : int64_t(0); };
  const int64_t first_pos = first_visible(s.pos_begin + r0), last_pos = s.pos_begin + r1 - 1;
  const int64_t last_block = last_pos / bs;
  const int64_t head_elems = bs * hd;  // one kv head's share of a block; the heads h0..h1 are adjacent
  auto at = [&](int64_t b) { return (static_cast<int64_t>(s.blocks[b]) * kvh + h0) * head_elems; };
  for (int64_t b0 = first_pos / bs; b0 <= last_block; b0 += nb) {
    const int64_t b1 = min64(b0 + nb, last_block + 1);  // blocks [b0, b1)
    const int64_t cbase = b0 * bs;
    const int64_t ca = max64(first_pos, cbase), cz = min64(last_pos, b1 * bs - 1);  // positions [ca, cz]
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j0 = max64(ca - b * bs, 0), j1 = min64(cz - b * bs + 1, bs);
      for (int64_t x = 0; x < nh; ++x)
        score_queries(Q + x * mh * hd, mh, hd, k_cache + at(b) + x * head_elems, j0, j1,
                      S + x * mh * cw + (b - b0) * bs, cw);
    }
    // Online softmax over the chunk, per query; what a query must not see gets weight 0.
    for (int64_t i = 0; i < m; ++i) {
      const int64_t last = s.pos_begin + r0 + (i % mh) / group, first = first_visible(last);
      const int64_t lo = max64(ca, first), hi = min64(cz, last);
      float* Si = S + i * cw - cbase;  // indexed by position
      if (lo > hi) {                   // a later row's window starts further on: nothing here
        for (int64_t p = ca; p <= cz; ++p) Si[p] = 0.0f;
        continue;
      }
      if (cap > 0.0f)
        for (int64_t p = lo; p <= hi; ++p) Si[p] = cap * std::tanh(Si[p] / cap);  // Gemma 2
      for (int64_t p = ca; p < lo; ++p) Si[p] = -INFINITY;
      for (int64_t p = hi + 1; p <= cz; ++p) Si[p] = -INFINITY;
      const float mnew = std::fmax(mx[i], max_of(Si + lo, hi - lo + 1));
      const float corr = vexp::exp_scalar(mx[i] - mnew);  // 0 on the first visible chunk
      const float psum = vexp::exp_shifted_in_place8(Si + ca, cz - ca + 1, mnew);
      mx[i] = mnew;
      sum[i] = sum[i] * corr + psum;
      if (corr != 1.0f) {
        const __m256 c = _mm256_set1_ps(corr);
        float* oi = O + i * hd;
        int64_t d = 0;
        for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(oi + d, _mm256_mul_ps(c, _mm256_loadu_ps(oi + d)));
        for (; d < hd; ++d) oi[d] *= corr;
      }
    }
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t j0 = max64(ca - b * bs, 0), j1 = min64(cz - b * bs + 1, bs);
      for (int64_t x = 0; x < nh; ++x)
        accumulate_queries(S + x * mh * cw + (b - b0) * bs, mh, cw, v_cache + at(b) + x * head_elems, hd, j0, j1,
                           O + x * mh * hd);
    }
  }
  for (int64_t x = 0; x < nh; ++x)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t g = 0; g < group; ++g) {
        const int64_t i = x * mh + r * group + g;
        const float inv = 1.0f / sum[i];
        float* dst = out + (s.row_begin + r0 + r) * (q_heads * hd) + ((h0 + x) * group + g) * hd;
        for (int64_t d = 0; d < hd; ++d) dst[d] = O[i * hd + d] * inv;
      }
}

}  // namespace

void attend_decode_tile(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                        const KvLayout& kv, int64_t q_heads, const AttentionSeq& s, int64_t h0, int64_t h1,
                        int64_t r0, int64_t r1, float scale, float* out) {
  decode_tile(q, q_stride, k_cache, v_cache, kv, q_heads, s, h0, h1, r0, r1, scale, out);
}

void attend_decode_tile(const float* q, int64_t q_stride, const uint16_t* k_cache, const uint16_t* v_cache,
                        const KvLayout& kv, int64_t q_heads, const AttentionSeq& s, int64_t h0, int64_t h1,
                        int64_t r0, int64_t r1, float scale, float* out) {
  decode_tile(q, q_stride, k_cache, v_cache, kv, q_heads, s, h0, h1, r0, r1, scale, out);
}

void exp_avx2(const float* x, float* y, int64_t n) {
  int64_t p = 0;
  for (; p + 8 <= n; p += 8) _mm256_storeu_ps(y + p, vexp::exp8(_mm256_loadu_ps(x + p)));
  for (; p < n; ++p) y[p] = vexp::exp_scalar(x[p]);
}

}  // namespace tpbatch::cpu::detail

#pragma GCC pop_options

#else  // not x86-64: decode_kernel_enabled() is false, so these are never called

namespace tpbatch::cpu::detail {

void attend_decode_tile(const float*, int64_t, const float*, const float*, const KvLayout&, int64_t,
                        const AttentionSeq&, int64_t, int64_t, int64_t, int64_t, float, float*) {
  throw Error("CPU backend: the AVX2 decode attention kernel called on a CPU without it");
}
void attend_decode_tile(const float*, int64_t, const uint16_t*, const uint16_t*, const KvLayout&, int64_t,
                        const AttentionSeq&, int64_t, int64_t, int64_t, int64_t, float, float*) {
  throw Error("CPU backend: the AVX2 decode attention kernel called on a CPU without it");
}
void exp_avx2(const float*, float*, int64_t) {
  throw Error("CPU backend: exp_avx2 called on a CPU without AVX2");
}

}  // namespace tpbatch::cpu::detail

#endif
