#include "model/model_runner.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "model/logit_combine.h"
#include "model/scratch_buffer.h"
#include "model/shard_bytes.h"

namespace tpbatch {
namespace {

constexpr int64_t kLogitRowsPerPass = 128;  // bounds the [rows x vocab-shard] logits buffer

}  // namespace

ModelRunner::ModelRunner(LlamaShard shard, Backend& backend, Communicator& tp, KvLayout kv)
    : shard_(std::move(shard)), be_(backend), tp_(tp), kv_(kv), act_(backend.activation_dtype()) {
  kv_.kv_heads = shard_.kv_heads;
  kv_.head_dim = shard_.config.head_dim;
  kv_.window = shard_.config.sliding_window;
  // Each layer's attention: its window (Gemma alternates local and global layers), score scale
  // (query_pre_attn_scalar, rope attention factor) and soft-cap.
  const ModelConfig& c = shard_.config;
  for (int64_t layer = shard_.placement.layers.begin; layer < shard_.placement.layers.end; ++layer) {
    KvLayout lk = kv_;
    lk.window = layer_window(c, layer);
    lk.scale = static_cast<float>(attention_score_scale(c));
    lk.softcap = static_cast<float>(c.attn_logit_softcap);
    layer_kv_.push_back(lk);
  }
  for (size_t l = 0; l < shard_.layers.size(); ++l) {
    k_cache_.push_back(be_.alloc(kv_.elements_per_layer(), kv_.dtype));
    v_cache_.push_back(be_.alloc(kv_.elements_per_layer(), kv_.dtype));
  }
}

size_t ModelRunner::kv_cache_bytes() const {
  return 2 * kv_.elements_per_layer() * shard_.layers.size() * dtype_size(kv_.dtype);
}

int64_t ModelRunner::kv_bytes_per_token(const ModelConfig& config, int tensor, int64_t layers, DType kv_dtype) {
  return kv_bytes_per_token_of_rank(config, tensor, 0, layers, kv_dtype);  // the formula `plan` uses too
}

BufferView ModelRunner::scratch(Buffer& b, size_t count, DType dtype) { return grow_scratch(be_, b, count, dtype); }

void ModelRunner::step(const StepInputs& in, std::vector<LogitResult>& results, std::vector<float>& full_logits) {
  run_stage(in);
  compute_logits(in, results, full_logits);
}

size_t ModelRunner::hidden_bytes(int64_t rows) const {
  return static_cast<size_t>(rows * shard_.config.hidden_size) * dtype_size(act_);
}

BufferView ModelRunner::hidden_input(int64_t rows) {
  return scratch(x_, static_cast<size_t>(rows * shard_.config.hidden_size), act_);
}

void ModelRunner::check_rope_tables(const StepInputs& in) const {
  if (in.rope_tables.empty()) return;
  if (static_cast<int64_t>(in.rope_tables.size()) != in.rows())
    throw Error("internal error: step rope tables do not match its rows");
  const size_t half = static_cast<size_t>(shard_.config.head_dim / 2);
  size_t tables = shard_.inv_freq.count() / half;
  if (!shard_.inv_freq_local.empty()) tables = std::min(tables, shard_.inv_freq_local.count() / half);
  for (int32_t t : in.rope_tables)
    if (t < 0 || static_cast<size_t>(t) >= tables)
      throw Error("internal error: step rope table " + std::to_string(t) + " of " + std::to_string(tables));
}

void ModelRunner::run_stage(const StepInputs& in) {
  const int64_t rows = in.rows(), H = shard_.config.hidden_size;
  if (static_cast<int64_t>(in.positions.size()) != rows) throw Error("internal error: step positions do not match its rows");
  check_rope_tables(in);
  // One upload per step: ids, positions, block tables and logit requests.
  seqs_ = in.attention_seqs();
  logit_rows_.clear();
  logit_targets_.clear();
  for (const auto& r : in.logits) {
    logit_rows_.push_back(r.row);
    logit_targets_.push_back(r.target);
  }
  be_.begin_step(StepBatch{in.tokens, in.positions, seqs_, logit_rows_, logit_targets_, in.rope_tables});
  BufferView x = hidden_input(rows);
  if (first_stage()) {
    be_.embedding(shard_.embedding.view(), shard_.vocab_range.begin, shard_.vocab_range.end, H, x);
    tp_.allreduce_sum(x, static_cast<size_t>(rows * H));  // VocabParallelEmbedding: each row came from one shard
    if (shard_.config.embedding_scale > 0)  // Gemma: embeddings times sqrt(hidden_size)
      be_.scale(x, static_cast<size_t>(rows * H), static_cast<float>(shard_.config.embedding_scale));
  }
  for (size_t l = 0; l < shard_.layers.size(); ++l) layer_forward(l, rows);
}

void ModelRunner::layer_forward(size_t l, int64_t rows) {
  const LayerShard& L = shard_.layers[l];
  const ModelConfig& c = shard_.config;
  const int64_t H = c.hidden_size, hd = c.head_dim;
  const int64_t nq = shard_.q_heads * hd, nk = shard_.kv_heads * hd, nqkv = nq + 2 * nk;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const size_t n = static_cast<size_t>(rows);
  BufferView x = x_.view();
  BufferView h = scratch(h_, n * H, act_);
  BufferView qkv = scratch(qkv_, n * nqkv, act_);
  BufferView attn = scratch(attn_, n * nq, act_);
  BufferView proj = scratch(proj_, n * H, act_);

  // Attention block: ColumnParallel qkv -> (per-head q/k norms) -> RoPE -> paged attention ->
  // RowParallel o_proj -> allreduce.
  be_.rmsnorm(x, L.input_norm.view(), h, rows, H, eps);
  linear(be_, h, L.wqkv, qkv, rows, nqkv, H);
  if (!L.bqkv.empty()) be_.add_bias(qkv, L.bqkv.view(), rows, nqkv);
  if (!L.q_norm.empty()) {  // Qwen3, Gemma 3: before RoPE
    be_.rmsnorm_heads(qkv, rows, nqkv, shard_.q_heads, hd, L.q_norm.view(), eps);
    be_.rmsnorm_heads(qkv.at(nq), rows, nqkv, shard_.kv_heads, hd, L.k_norm.view(), eps);
  }
  const KvLayout& kv = layer_kv_[l];
  // Gemma 3's local (sliding) layers rotate with their own base.
  const BufferView inv_freq = kv.window > 0 && !shard_.inv_freq_local.empty() ? shard_.inv_freq_local.view()
                                                                               : shard_.inv_freq.view();
  be_.rope(qkv, nqkv, shard_.q_heads, hd, inv_freq);
  be_.rope(qkv.at(nq), nqkv, shard_.kv_heads, hd, inv_freq);
  be_.paged_attention(qkv, nqkv, qkv.at(nq), qkv.at(nq + nk), nqkv, k_cache_[l].view(), v_cache_[l].view(), kv,
                      shard_.q_heads, attn);
  linear(be_, attn, L.wo, proj, rows, H, nq, row_parallel_input_.whole_row_amax(be_, tp_, L.wo, attn, rows, nq));
  tp_.allreduce_sum(proj, n * H);
  if (!L.bo.empty()) be_.add_bias(proj, L.bo.view(), rows, H);  // once, after the partial sums are reduced

  // MLP block: (residual add fused with the norm) ColumnParallel gate/up -> act(gate)·up -> RowParallel
  // down -> allreduce. Gemma's sandwich norms also normalise each block's output before the
  // residual add, and the MLP's input with a norm of its own.
  const int64_t I = shard_.inter;
  BufferView gu = scratch(gu_, n * 2 * I, act_);
  BufferView act = scratch(act_buf_, n * I, act_);
  if (L.pre_ffn_norm.empty()) {
    be_.add_rmsnorm(x, proj, L.post_norm.view(), h, rows, H, eps);
  } else {
    be_.rmsnorm(proj, L.post_norm.view(), h, rows, H, eps);
    be_.add(x, h, n * H);
    be_.rmsnorm(x, L.pre_ffn_norm.view(), h, rows, H, eps);
  }
  if (L.is_moe()) {  // Mixtral, Qwen3-MoE: this rank's slices of the routed experts (model/moe.h)
    moe_.forward(be_, tp_, shard_, L, h, rows, proj);
  } else {
    linear(be_, h, L.wgu, gu, rows, 2 * I, H);
    if (!L.bgu.empty()) be_.add_bias(gu, L.bgu.view(), rows, 2 * I);
    if (c.hidden_act == "gelu_pytorch_tanh") {
      be_.gelu_tanh_mul(gu, act, rows, I);
    } else {
      be_.silu_mul(gu, act, rows, I);
    }
    linear(be_, act, L.wdown, proj, rows, H, I, row_parallel_input_.whole_row_amax(be_, tp_, L.wdown, act, rows, I));
  }
  tp_.allreduce_sum(proj, n * H);
  if (!L.bdown.empty()) be_.add_bias(proj, L.bdown.view(), rows, H);
  if (L.post_ffn_norm.empty()) {
    be_.add(x, proj, n * H);
  } else {
    be_.rmsnorm(proj, L.post_ffn_norm.view(), h, rows, H, eps);
    be_.add(x, h, n * H);
  }
}

void ModelRunner::compute_embeddings(const StepInputs& in, std::vector<float>& sums) {
  const ModelConfig& c = shard_.config;
  const int64_t H = c.hidden_size;
  sums.assign(in.embeds.size() * static_cast<size_t>(H), 0.0f);
  embed_rows_.clear();
  for (const EmbedRequest& e : in.embeds) {
    if (e.num_rows < 1 || e.row < 0 || e.row + e.num_rows > in.rows())
      throw Error("internal error: an embedding request outside the step's rows");
    for (int64_t r = e.row; r < e.row + e.num_rows; ++r) embed_rows_.push_back(r);
  }
  const int64_t n = static_cast<int64_t>(embed_rows_.size());
  if (n == 0) return;
  // The same final norm as before the LM head, on the pooled rows only; summed on the host.
  const size_t un = static_cast<size_t>(n);
  BufferView hrows = scratch(hrows_, un * H, act_);
  BufferView normed = scratch(normed_, un * H, act_);
  be_.copy_rows(x_.view(), H, embed_rows_, H, hrows, H);
  be_.rmsnorm(hrows, shard_.final_norm.view(), normed, n, H, static_cast<float>(c.rms_norm_eps));
  embed_host_.resize(un * H);
  if (act_ == DType::F32) {
    be_.download(normed, embed_host_.data(), un * H * sizeof(float));
  } else {
    embed_host16_.resize(un * H);
    be_.download(normed, embed_host16_.data(), un * H * sizeof(uint16_t));
    for (size_t i = 0; i < un * H; ++i)
      embed_host_[i] = act_ == DType::BF16 ? bf16_to_f32(embed_host16_[i]) : f16_to_f32(embed_host16_[i]);
  }
  size_t at = 0;
  std::vector<double> acc(static_cast<size_t>(H));
  for (size_t k = 0; k < in.embeds.size(); ++k) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t r = 0; r < in.embeds[k].num_rows; ++r, ++at)
      for (int64_t i = 0; i < H; ++i) acc[i] += embed_host_[at * H + i];
    std::copy(acc.begin(), acc.end(), sums.begin() + static_cast<std::ptrdiff_t>(k * H));
  }
}

// The rows of this pass [p0, p0 + n) that draw on the backend: their tokens only come back. With
// TP the shards are all-gathered on the device, as for full rows, and reassembled into whole rows
// there; the group's first rank draws, as only its results are read (the leader's scheduler, or
// the message to it): the others would spend the same device time, or on the CPU backend the
// same host cores, for nothing.
void ModelRunner::draw_pass(const StepInputs& in, int64_t p0, int64_t n, BufferView logits,
                            std::vector<LogitResult>& results) {
  const int64_t V = shard_.config.vocab_size, vn = shard_.vocab_range.size(), vmax = shard_.vocab_shard_max;
  const int tp = tp_.size();
  draw_rows_.clear();
  draw_params_.clear();
  draw_max_.clear();
  for (const DrawRequest& d : in.draws) {
    if (d.request < p0 || d.request >= p0 + n) continue;
    if (in.logits[d.request].full) throw Error("internal error: a row both drawn and brought to the host");
    const bool masked = mask_of_request_[d.request - p0] >= 0;
    if (masked && results[d.request].allowed_argmax < 0) continue;  // nothing to draw from: the host ends the row
    draw_rows_.push_back(d.request - p0);
    draw_params_.push_back(d.params);
    const LogitResult& res = results[d.request];
    draw_max_.push_back(masked ? res.allowed_max_logit : res.max_logit);
  }
  const int64_t nd = static_cast<int64_t>(draw_rows_.size());
  if (nd == 0) return;
  if (!host_draw_) throw Error("internal error: rows to draw but no host sampler");
  drawn_.resize(draw_rows_.size());
  if (tp == 1) {  // the rows are whole already
    if (tp_.rank() == 0) be_.sample_rows(logits, V, draw_rows_, draw_params_, draw_max_, host_draw_, drawn_);
  } else {
    BufferView pad = scratch(pad_, static_cast<size_t>(nd * vmax), DType::F32);
    BufferView gath = scratch(gathered_, static_cast<size_t>(nd * vmax * tp), DType::F32);
    be_.copy_rows(logits, vn, draw_rows_, vn, pad, vmax);
    tp_.allgather(pad, gath, static_cast<size_t>(nd * vmax) * sizeof(float));
    if (tp_.rank() != 0) return;
    BufferView whole = scratch(whole_, static_cast<size_t>(nd * V), DType::F32);
    whole_rows_.resize(static_cast<size_t>(nd));
    for (int64_t f = 0; f < nd; ++f) whole_rows_[f] = f;
    for (int r = 0; r < tp; ++r) {
      const Range vr = balanced_split(V, tp, r);
      be_.copy_rows(gath.at(r * nd * vmax), vmax, whole_rows_, vr.size(), whole.at(vr.begin), V);
    }
    be_.sample_rows(whole, V, whole_rows_, draw_params_, draw_max_, host_draw_, drawn_);
  }
  if (tp_.rank() != 0) return;
  for (int64_t f = 0; f < nd; ++f) {
    LogitResult& res = results[p0 + draw_rows_[f]];
    res.token = drawn_[f].token;
    res.token_logit = drawn_[f].logit;
  }
}

void ModelRunner::compute_logits(const StepInputs& in, std::vector<LogitResult>& results,
                                 std::vector<float>& full_logits) {
  const ModelConfig& c = shard_.config;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  const int64_t v0 = shard_.vocab_range.begin, vn = shard_.vocab_range.size();
  const int tp = tp_.size();
  const int64_t n_req = static_cast<int64_t>(in.logits.size());
  results.assign(n_req, LogitResult{});
  int64_t n_full = 0;
  for (const auto& r : in.logits) n_full += r.full;
  full_logits.resize(static_cast<size_t>(n_full * V));  // every value is written below
  int64_t full_done = 0;

  std::vector<LogitStats> all;
  for (int64_t p0 = 0; p0 < n_req; p0 += kLogitRowsPerPass) {
    const int64_t n = std::min(kLogitRowsPerPass, n_req - p0);
    const size_t un = static_cast<size_t>(n);
    BufferView hrows = scratch(hrows_, un * H, act_);
    BufferView normed = scratch(normed_, un * H, act_);
    BufferView logits = scratch(logits_, un * vn, DType::F32);
    const int64_t nm = pass_masks(in, p0, n);
    // One allgather carries both: each row's unmasked statistics, then the masked rows' ones.
    const size_t rows_of_stats = un + static_cast<size_t>(nm);
    BufferView stats = scratch(stats_, rows_of_stats * 4, DType::F32);  // LogitStats is 4 words
    BufferView all_stats = scratch(all_stats_, rows_of_stats * 4 * tp, DType::F32);
    be_.gather_logit_rows(x_.view(), H, p0, n, hrows);
    be_.rmsnorm(hrows, shard_.final_norm.view(), normed, n, H, static_cast<float>(c.rms_norm_eps));
    be_.matmul_nt(normed, shard_.lm_head_weights(), logits, n, vn, H);
    if (c.final_logit_softcap > 0) be_.softcap(logits, un * vn, static_cast<float>(c.final_logit_softcap));  // Gemma 2
    be_.logit_stats(logits, n, vn, v0, p0, stats);
    if (nm > 0) mask_pass(in, p0, logits, stats.at(static_cast<int64_t>(un) * 4));
    tp_.allgather(stats, all_stats, rows_of_stats * sizeof(LogitStats));
    all.resize(rows_of_stats * tp);
    be_.download(all_stats, all.data(), all.size() * sizeof(LogitStats));
    const int64_t stride = static_cast<int64_t>(rows_of_stats);
    combine_logit_stats(all, stride, n, tp, results.data() + p0);
    masked_results_.clear();
    for (const int64_t row : mask_rows_) masked_results_.push_back(&results[p0 + row]);
    combine_allowed_maxima(all, stride, n, nm, tp, masked_results_);
    draw_pass(in, p0, n, logits, results);
    full_done += gather_full_logits(in, p0, n, logits, full_logits.data() + full_done * V);
  }
}

// The pass's masked rows (of its logits buffer) in request order, and for each row of the pass the
// index of its mask among them (-1: none); returns how many.
int64_t ModelRunner::pass_masks(const StepInputs& in, int64_t p0, int64_t n) {
  mask_rows_.clear();
  pass_mask_of_.clear();
  mask_of_request_.assign(static_cast<size_t>(n), -1);
  for (const TokenMask& m : in.masks) {
    if (m.request < p0 || m.request >= p0 + n) continue;
    if (in.logits[m.request].full) throw Error("internal error: a masked row brought to the host");
    if (mask_of_request_[m.request - p0] >= 0) throw Error("internal error: a row with two masks");
    mask_of_request_[m.request - p0] = static_cast<int64_t>(mask_rows_.size());
    mask_rows_.push_back(m.request - p0);
    pass_mask_of_.push_back(&m);
  }
  return static_cast<int64_t>(mask_rows_.size());
}

// The masked rows on this rank's vocabulary shard [v0, v0 + vn): a copy of them with the tokens
// their masks do not allow at -inf (the shard's bits of each mask, 1 bit a token), whose statistics
// go to masked_stats. The unmasked logits keep their own statistics (log Σexp for the recorded
// logprob); the masked copy of a row the backend draws goes back over it, as that draw's input.
void ModelRunner::mask_pass(const StepInputs& in, int64_t p0, BufferView logits, BufferView masked_stats) {
  const int64_t v0 = shard_.vocab_range.begin, vn = shard_.vocab_range.size();
  const int64_t nm = static_cast<int64_t>(mask_rows_.size());
  const int64_t words = mask_words_per_row(vn);
  mask_words_host_.resize(static_cast<size_t>(nm * words));
  for (int64_t k = 0; k < nm; ++k)
    in.mask_bits(*pass_mask_of_[k]).write_shard_words(v0, vn, mask_words_host_.data() + k * words);
  BufferView bits = scratch(mask_words_, mask_words_host_.size(), DType::I64);
  BufferView masked = scratch(masked_, static_cast<size_t>(nm * vn), DType::F32);
  be_.upload(bits, mask_words_host_.data(), mask_words_host_.size() * sizeof(uint64_t));
  be_.copy_rows(logits, vn, mask_rows_, vn, masked, vn);
  be_.mask_logits(masked, nm, vn, bits);
  be_.logit_stats(masked, nm, vn, v0, p0, masked_stats);  // targets unused: masked rows are generating ones
  for (const DrawRequest& d : in.draws) {
    const int64_t row = d.request - p0;
    if (row < 0 || row >= static_cast<int64_t>(mask_of_request_.size()) || mask_of_request_[row] < 0) continue;
    const int64_t one[1] = {mask_of_request_[row]};
    be_.copy_rows(masked, vn, one, vn, logits.at(row * vn), vn);
  }
}

// Sampling rows: gather their full logits (padded shards), only when asked.
int64_t ModelRunner::gather_full_logits(const StepInputs& in, int64_t p0, int64_t n, BufferView logits, float* dst) {
  const int64_t V = shard_.config.vocab_size, vn = shard_.vocab_range.size(), vmax = shard_.vocab_shard_max;
  const int tp = tp_.size();
  full_rows_.clear();
  for (int64_t i = 0; i < n; ++i)
    if (in.logits[p0 + i].full) full_rows_.push_back(i);
  const int64_t nf = static_cast<int64_t>(full_rows_.size());
  if (nf == 0) return 0;
  if (tp == 1) {  // the rows are whole already: one copy each (a sampled step's 64 x 128k rows: 32 MiB)
    if (nf == n) {
      be_.download(logits, dst, static_cast<size_t>(n * V) * sizeof(float));
    } else {
      BufferView picked = scratch(pad_, static_cast<size_t>(nf * V), DType::F32);
      be_.copy_rows(logits, vn, full_rows_, vn, picked, V);
      be_.download(picked, dst, static_cast<size_t>(nf * V) * sizeof(float));
    }
    return nf;
  }
  BufferView pad = scratch(pad_, static_cast<size_t>(nf * vmax), DType::F32);
  BufferView gath = scratch(gathered_, static_cast<size_t>(nf * vmax * tp), DType::F32);
  be_.copy_rows(logits, vn, full_rows_, vn, pad, vmax);
  tp_.allgather(pad, gath, static_cast<size_t>(nf * vmax) * sizeof(float));
  gathered_host_.resize(static_cast<size_t>(nf * vmax * tp));
  be_.download(gath, gathered_host_.data(), gathered_host_.size() * sizeof(float));
  for (int64_t f = 0; f < nf; ++f)
    for (int r = 0; r < tp; ++r) {
      const Range vr = balanced_split(V, tp, r);
      std::copy_n(gathered_host_.data() + (r * nf + f) * vmax, vr.size(), dst + f * V + vr.begin);
    }
  return nf;
}

}  // namespace tpbatch
