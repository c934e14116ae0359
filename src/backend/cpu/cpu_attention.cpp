#include "backend/cpu/cpu_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "common/error.h"

namespace tpbatch::cpu {
namespace {

inline float load(const float* p, int64_t i) { return p[i]; }
inline float load(const uint16_t* p, int64_t i) { return bf16_to_f32(p[i]); }
inline void store(float* p, int64_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, int64_t i, float v) { p[i] = f32_to_bf16(v); }

// One query row of one head over cache positions [first, last]: scores, softmax, weighted V.
// The hot loop of CPU attention: compiled for AVX-512 / AVX2 as well, picked at run time.
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
void attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride, C* k_cache,
               C* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs, int64_t num_seqs,
               float* out) {
  const int64_t hd = kv.head_dim, bs = kv.block_size, kvh = kv.kv_heads;
  const int64_t group = q_heads / kvh;
  const float scale = kv.scale > 0.0f ? kv.scale : 1.0f / std::sqrt(static_cast<float>(hd));
  // 1. Append this step's keys and values to each sequence's blocks.
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
  // 2. Causal attention of every row over positions 0..its own (a window's worth with sliding
  // windows). Rows x heads are independent: spread them over the rank's threads.
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
    const int64_t first = kv.window > 0 ? std::max<int64_t>(0, last - kv.window + 1) : 0;
    attend_one<C>(q + row * q_stride + h * hd, k_cache, v_cache, kv, h / group, s.blocks, first, last, scale,
                  out + row * (q_heads * hd) + h * hd);
  }
}

}  // namespace

void paged_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                     void* k_cache, void* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs,
                     int64_t num_seqs, float* out) {
  switch (kv.dtype) {
    case DType::F32:
      attention(q, q_stride, k, v, kv_stride, static_cast<float*>(k_cache), static_cast<float*>(v_cache), kv, q_heads,
                seqs, num_seqs, out);
      return;
    case DType::BF16:
      attention(q, q_stride, k, v, kv_stride, static_cast<uint16_t*>(k_cache), static_cast<uint16_t*>(v_cache), kv,
                q_heads, seqs, num_seqs, out);
      return;
    default:
      throw Error(std::string("CPU backend: a ") + dtype_name(kv.dtype) + " KV cache is not supported (F32 or BF16)");
  }
}

}  // namespace tpbatch::cpu
