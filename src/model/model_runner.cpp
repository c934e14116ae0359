#include "model/model_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tpbatch {
namespace {

constexpr int64_t kLogitRowsPerPass = 128;  // bounds the [rows x vocab-shard] logits buffer

template <typename T>
T* sized(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Per-shard summary of one logits row, exchanged by allgather.
struct ShardStats {
  float max_logit;
  int32_t argmax;
  float sum_exp;       // sum of exp(logit - max_logit) over the shard
  float target_logit;  // NaN unless the target lies in this shard
};

}  // namespace

ModelRunner::ModelRunner(LlamaShard shard, Backend& backend, Communicator& tp, int64_t kv_blocks, int64_t block_size)
    : shard_(std::move(shard)), be_(backend), tp_(tp) {
  kv_.num_blocks = kv_blocks;
  kv_.kv_heads = shard_.kv_heads;
  kv_.block_size = block_size;
  kv_.head_dim = shard_.config.head_dim;
  kv_.window = shard_.config.sliding_window;
  k_cache_.resize(shard_.layers.size());
  v_cache_.resize(shard_.layers.size());
  for (size_t l = 0; l < shard_.layers.size(); ++l) {
    k_cache_[l].assign(kv_.floats_per_layer(), 0.0f);
    v_cache_[l].assign(kv_.floats_per_layer(), 0.0f);
  }
}

size_t ModelRunner::kv_cache_bytes() const { return 2 * kv_.floats_per_layer() * shard_.layers.size() * sizeof(float); }

int64_t ModelRunner::kv_bytes_per_token(const ModelConfig& config, int tensor, int64_t layers) {
  const int64_t kv_heads = kv_heads_of_rank(config, tensor, 0).size();
  return 2 * kv_heads * config.head_dim * static_cast<int64_t>(sizeof(float)) * layers;
}

void ModelRunner::step(const StepInputs& in, std::vector<LogitResult>& results, std::vector<float>& full_logits) {
  run_stage(in);
  compute_logits(in, results, full_logits);
}

float* ModelRunner::hidden_input(int64_t rows) { return sized(x_, rows * shard_.config.hidden_size); }

void ModelRunner::run_stage(const StepInputs& in) {
  const int64_t rows = in.rows(), H = shard_.config.hidden_size;
  float* x = sized(x_, rows * H);
  if (first_stage()) {
    be_.embedding(in.tokens.data(), rows, shard_.embedding.data(), shard_.vocab_range.begin, shard_.vocab_range.end,
                  H, x);
    tp_.allreduce_sum(x, rows * H);  // VocabParallelEmbedding: each row came from exactly one shard
  }
  const std::vector<AttentionSeq> seqs = in.attention_seqs();
  for (size_t l = 0; l < shard_.layers.size(); ++l) layer_forward(l, rows, seqs);
}

void ModelRunner::layer_forward(size_t l, int64_t rows, const std::vector<AttentionSeq>& seqs) {
  const LayerShard& L = shard_.layers[l];
  const ModelConfig& c = shard_.config;
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t nq = shard_.q_heads * hd, nk = shard_.kv_heads * hd, nqkv = nq + 2 * nk;
  const float eps = static_cast<float>(c.rms_norm_eps);
  float* x = x_.data();
  float* h = sized(h_, rows * H);
  float* qkv = sized(qkv_, rows * nqkv);
  float* attn = sized(attn_, rows * nq);
  float* proj = sized(proj_, rows * H);

  // Attention block: ColumnParallel qkv -> RoPE -> paged attention -> RowParallel o_proj -> allreduce.
  be_.rmsnorm(x, L.input_norm.data(), h, rows, H, eps);
  be_.matmul_nt(h, L.wqkv.data(), qkv, rows, nqkv, H);
  if (!L.bqkv.empty()) be_.add_bias(qkv, L.bqkv.data(), rows, nqkv);
  std::vector<int32_t> positions(rows);
  for (const auto& s : seqs)
    for (int64_t r = 0; r < s.num_rows; ++r) positions[s.row_begin + r] = static_cast<int32_t>(s.pos_begin + r);
  be_.rope(qkv, rows, nqkv, shard_.q_heads, hd, positions.data(), shard_.inv_freq.data());
  be_.rope(qkv + nq, rows, nqkv, shard_.kv_heads, hd, positions.data(), shard_.inv_freq.data());
  be_.paged_attention(qkv, nqkv, qkv + nq, qkv + nq + nk, nqkv, k_cache_[l].data(), v_cache_[l].data(), kv_,
                      shard_.q_heads, seqs.data(), static_cast<int64_t>(seqs.size()), attn);
  be_.matmul_nt(attn, L.wo.data(), proj, rows, H, nq);
  tp_.allreduce_sum(proj, rows * H);
  if (!L.bo.empty()) be_.add_bias(proj, L.bo.data(), rows, H);  // once, after the partial sums are reduced
  be_.add(x, proj, rows * H);

  // MLP block: ColumnParallel gate/up -> SiLU·up -> RowParallel down -> allreduce.
  const int64_t I = shard_.inter;
  float* gu = sized(gu_, rows * 2 * I);
  float* act = sized(act_, rows * I);
  be_.rmsnorm(x, L.post_norm.data(), h, rows, H, eps);
  be_.matmul_nt(h, L.wgu.data(), gu, rows, 2 * I, H);
  be_.silu_mul(gu, act, rows, I);
  be_.matmul_nt(act, L.wdown.data(), proj, rows, H, I);
  tp_.allreduce_sum(proj, rows * H);
  be_.add(x, proj, rows * H);
}

void ModelRunner::compute_logits(const StepInputs& in, std::vector<LogitResult>& results,
                                 std::vector<float>& full_logits) {
  const ModelConfig& c = shard_.config;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const int64_t v0 = shard_.vocab_range.begin, vn = shard_.vocab_range.size(), vmax = shard_.vocab_shard_max;
  const int tp = tp_.size();
  const int64_t n_req = static_cast<int64_t>(in.logits.size());
  results.assign(n_req, LogitResult{});
  int64_t n_full = 0;
  for (const auto& r : in.logits) n_full += r.full;
  full_logits.assign(n_full * V, 0.0f);
  int64_t full_done = 0;

  std::vector<float> hrows, normed;
  std::vector<ShardStats> mine, all;
  std::vector<float> pad, gathered;
  for (int64_t p0 = 0; p0 < n_req; p0 += kLogitRowsPerPass) {
    const int64_t n = std::min(kLogitRowsPerPass, n_req - p0);
    hrows.resize(n * H);
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(x_.data() + in.logits[p0 + i].row * H, H, hrows.data() + i * H);
    normed.resize(n * H);
    be_.rmsnorm(hrows.data(), shard_.final_norm.data(), normed.data(), n, H, static_cast<float>(c.rms_norm_eps));
    float* logits = sized(logits_, n * vn);
    be_.matmul_nt(normed.data(), shard_.lm_head_weights(), logits, n, vn, H);

    mine.resize(n);
#pragma omp parallel for if (n > 1)
    for (int64_t i = 0; i < n; ++i) {
      const float* row = logits + i * vn;
      ShardStats st{-std::numeric_limits<float>::infinity(), 0, 0.0f, std::numeric_limits<float>::quiet_NaN()};
      for (int64_t j = 0; j < vn; ++j)
        if (row[j] > st.max_logit) st.max_logit = row[j], st.argmax = static_cast<int32_t>(v0 + j);
      double se = 0.0;
      for (int64_t j = 0; j < vn; ++j) se += std::exp(static_cast<double>(row[j]) - st.max_logit);
      st.sum_exp = static_cast<float>(se);
      const int32_t target = in.logits[p0 + i].target;
      if (target >= v0 && target < v0 + vn) st.target_logit = row[target - v0];
      mine[i] = st;
    }
    all.resize(n * tp);
    tp_.allgather(mine.data(), all.data(), n * sizeof(ShardStats));
    for (int64_t i = 0; i < n; ++i) {
      LogitResult& res = results[p0 + i];
      float mx = -std::numeric_limits<float>::infinity();
      int32_t arg = 0;
      float target = std::numeric_limits<float>::quiet_NaN();
      for (int r = 0; r < tp; ++r) {  // shards are in vocabulary order: the first maximum is the lowest id
        const ShardStats& st = all[r * n + i];
        if (st.max_logit > mx) mx = st.max_logit, arg = st.argmax;
        if (!std::isnan(st.target_logit)) target = st.target_logit;
      }
      double z = 0.0;
      for (int r = 0; r < tp; ++r) z += all[r * n + i].sum_exp * std::exp(static_cast<double>(all[r * n + i].max_logit) - mx);
      res.argmax = arg;
      res.max_logit = mx;
      res.log_z = static_cast<float>(mx + std::log(z));
      res.target_logit = target;
    }

    // Sampling rows: gather their full logits (padded shards), only when asked.
    int64_t nf = 0;
    for (int64_t i = 0; i < n; ++i) nf += in.logits[p0 + i].full;
    if (nf == 0) continue;
    pad.assign(nf * vmax, 0.0f);
    int64_t k = 0;
    for (int64_t i = 0; i < n; ++i)
      if (in.logits[p0 + i].full) std::copy_n(logits + i * vn, vn, pad.data() + (k++) * vmax);
    gathered.resize(nf * vmax * tp);
    tp_.allgather(pad.data(), gathered.data(), nf * vmax * sizeof(float));
    for (int64_t f = 0; f < nf; ++f) {
      float* dst = full_logits.data() + (full_done + f) * V;
      for (int r = 0; r < tp; ++r) {
        const Range vr = balanced_split(V, tp, r);
        std::copy_n(gathered.data() + (r * nf + f) * vmax, vr.size(), dst + vr.begin);
      }
    }
    full_done += nf;
  }
}

}  // namespace tpbatch
