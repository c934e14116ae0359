// The CPU backend: GEMMs through OpenBLAS, everything else plain loops. It is also the reference
// every CUDA kernel is tested against, so it stays simple.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/backend.h"

namespace tpbatch {
namespace {

// One query row of one head over cache positions [first, last]: scores, softmax, weighted V.
// The hot loop of CPU attention: compiled for AVX-512 / AVX2 as well, picked at run time.
__attribute__((target_clones("avx512f", "arch=haswell", "default")))
void attend_one(const float* qh, const float* k_cache, const float* v_cache, const KvLayout& kv, int64_t kv_head,
                const int32_t* blocks, int64_t first, int64_t last, float scale, float* out) {
  const int64_t hd = kv.head_dim, bs = kv.block_size, kvh = kv.kv_heads;
  thread_local std::vector<float> scores, acc;
  scores.resize(static_cast<size_t>(last + 1));
  acc.assign(static_cast<size_t>(hd), 0.0f);
  float* sc = scores.data();
  float* ac = acc.data();
  auto slot = [&](const float* cache, int64_t pos) {
    return cache + ((static_cast<int64_t>(blocks[pos / bs]) * kvh + kv_head) * bs + pos % bs) * hd;
  };
  float mx = -INFINITY;
  for (int64_t p = first; p <= last; ++p) {
    const float* kp = slot(k_cache, p);
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int64_t d = 0; d < hd; ++d) dot += qh[d] * kp[d];
    sc[p] = dot * scale;
    mx = std::max(mx, sc[p]);
  }
  float denom = 0.0f;
  for (int64_t p = first; p <= last; ++p) {
    sc[p] = std::exp(sc[p] - mx);
    denom += sc[p];
  }
  for (int64_t p = first; p <= last; ++p) {
    const float* vp = slot(v_cache, p);
    const float wgt = sc[p];
#pragma omp simd
    for (int64_t d = 0; d < hd; ++d) ac[d] += wgt * vp[d];
  }
  const float inv = 1.0f / denom;
  for (int64_t d = 0; d < hd; ++d) out[d] = ac[d] * inv;
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }

  void matmul_nt(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k) override {
    if (m == 0 || n == 0) return;
    if (m == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0f, w, k, x, 1, 0.0f, y, 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
    }
  }

  void rmsnorm(const float* x, const float* w, float* out, int64_t m, int64_t n, float eps) override {
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * n;
      float* oi = out + i * n;
      double ss = 0.0;
      for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(xi[j]) * xi[j];
      const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
      for (int64_t j = 0; j < n; ++j) oi[j] = xi[j] * scale * w[j];
    }
  }

  void add_bias(float* x, const float* bias, int64_t m, int64_t n) override {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) x[i * n + j] += bias[j];
  }

  void add(float* x, const float* y, size_t count) override {
    for (size_t i = 0; i < count; ++i) x[i] += y[i];
  }

  void rope(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, const int32_t* positions,
            const float* inv_freq) override {
    const int64_t half = head_dim / 2;
    std::vector<float> cs(half), sn(half);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(positions[r]) * inv_freq[i];
        cs[i] = static_cast<float>(std::cos(angle));
        sn[i] = static_cast<float>(std::sin(angle));
      }
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + r * row_stride + h * head_dim;
        for (int64_t i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * cs[i] - b * sn[i];
          v[i + half] = b * cs[i] + a * sn[i];
        }
      }
    }
  }

  void silu_mul(const float* gu, float* out, int64_t m, int64_t inter) override {
    for (int64_t r = 0; r < m; ++r) {
      const float* g = gu + r * 2 * inter;
      const float* u = g + inter;
      float* o = out + r * inter;
      for (int64_t i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  }

  void paged_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                       float* k_cache, float* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs,
                       int64_t num_seqs, float* out) override {
    const int64_t hd = kv.head_dim, bs = kv.block_size, kvh = kv.kv_heads;
    const int64_t group = q_heads / kvh;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    auto slot = [&](float* cache, const AttentionSeq& s, int64_t pos, int64_t head) {
      const int64_t block = s.blocks[pos / bs];
      return cache + ((block * kvh + head) * bs + pos % bs) * hd;
    };
    // 1. Append this step's keys and values to each sequence's blocks.
    for (int64_t si = 0; si < num_seqs; ++si) {
      const AttentionSeq& s = seqs[si];
      for (int64_t r = 0; r < s.num_rows; ++r) {
        const int64_t row = s.row_begin + r, pos = s.pos_begin + r;
        for (int64_t h = 0; h < kvh; ++h) {
          std::memcpy(slot(k_cache, s, pos, h), k + row * kv_stride + h * hd, hd * sizeof(float));
          std::memcpy(slot(v_cache, s, pos, h), v + row * kv_stride + h * hd, hd * sizeof(float));
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
      attend_one(q + row * q_stride + h * hd, k_cache, v_cache, kv, h / group, s.blocks, first, last, scale,
                 out + row * (q_heads * hd) + h * hd);
    }
  }

  void embedding(const int32_t* ids, int64_t count, const float* table, int64_t vocab_begin, int64_t vocab_end,
                 int64_t dim, float* out) override {
    for (int64_t i = 0; i < count; ++i) {
      const int64_t id = ids[i];
      if (id >= vocab_begin && id < vocab_end)
        std::memcpy(out + i * dim, table + (id - vocab_begin) * dim, dim * sizeof(float));
      else
        std::memset(out + i * dim, 0, dim * sizeof(float));
    }
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace tpbatch
