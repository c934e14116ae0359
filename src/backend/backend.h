#pragma once
// The compute a model shard needs, behind one interface: the CPU backend (GEMM kernels + plain
// loops, the reference) and the CUDA backend (cuBLAS + kernels/). The backend owns every byte the
// model computes on: weights, the KV cache, activations and scratch are Buffers it allocated, and
// ModelRunner only ever sees the small downloads it asks for (LM-head statistics, sampled rows).
//
// Shapes are row-major; "rows" are the tokens of one engine step (all sequences' chunks).
// Element types: weights keep their storage dtype (F32, BF16 or F16); norm weights, biases and
// RoPE frequencies are F32; activations are activation_dtype() (F32 on the CPU, BF16 on CUDA);
// logits are F32. Operations are queued in order (asynchronous on CUDA); download() waits.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "backend/buffer.h"
#include "backend/dtype.h"

namespace tpbatch {

// One sequence's slice of an engine step, as the attention kernel sees it.
struct AttentionSeq {
  int64_t row_begin = 0;        // first row of the step that belongs to this sequence
  int64_t num_rows = 0;         // tokens of this sequence in the step (a prefill chunk, or 1)
  int64_t pos_begin = 0;        // position of the first of them (tokens before are in the cache)
  const int32_t* blocks = nullptr;  // host block table: KV cache blocks holding positions 0.. in order
  int64_t num_blocks = 0;
};

// Paged KV cache geometry of one layer: [num_blocks][kv_heads][block_size][head_dim] for K and V.
struct KvLayout {
  int64_t num_blocks = 0;
  int64_t kv_heads = 0;
  int64_t block_size = 16;
  int64_t head_dim = 0;
  int64_t window = 0;           // sliding-window attention: a query sees the last `window` positions; 0 = all
  DType dtype = DType::F32;     // element type of the cache
  float scale = 0.0f;           // softmax scale of q·k; 0 = 1/sqrt(head_dim)
  float softcap = 0.0f;         // scores = softcap * tanh(scores / softcap) before the mask (Gemma 2); 0 = none
  size_t elements_per_layer() const { return static_cast<size_t>(num_blocks * kv_heads * block_size * head_dim); }
};

// What the step operations need to know about the current step (host memory; begin_step copies
// what it needs, so the spans need only live through the call).
struct StepBatch {
  std::span<const int32_t> tokens;        // [rows]: embedding ids (first pipeline stage)
  std::span<const int32_t> positions;     // [rows]: RoPE positions
  std::span<const AttentionSeq> seqs;     // rows laid out sequence after sequence
  std::span<const int64_t> logit_rows;    // rows whose logits are wanted, in request order
  std::span<const int32_t> logit_targets; // per request: token whose logit is wanted, -1 none
  // [rows] or empty (all 0): which of rope's frequency tables each row turns by (Phi-3 longrope:
  // 1, the long factors, for the rows of sequences past the original context).
  std::span<const int32_t> rope_tables;
  int64_t rows() const { return static_cast<int64_t>(tokens.size()); }
};

// Per-shard summary of one logits row (exchanged by allgather; combined on the host).
struct LogitStats {
  float max_logit;
  int32_t argmax;       // global id of the lowest-id maximum in the shard
  float sum_exp;        // sum of exp(logit - max_logit) over the shard
  float target_logit;   // NaN unless the target lies in the shard
};
static_assert(sizeof(LogitStats) == 16);

// What a sampled draw reads besides the logits (engine/sampler.h: temperature > 0, top-k, top-p,
// min-p, and the counters that key its uniform). Plain data: it travels in the step's message.
struct DrawParams {
  double temperature = 1.0;
  int64_t top_k = 0;
  double top_p = 1.0;
  double min_p = 0.0;
  uint64_t seed = 0, row = 0, step = 0, sample = 0;
};

// A drawn token and its logit (the caller's logprob is logit - log_z, from the LM-head statistics).
struct DrawnToken {
  int32_t token = -1;
  float logit = 0.0f;
};

// The host's draw of one row (the engine's sample_token): the CPU backend's whole implementation of
// sample_rows, and the CUDA backend's for the rare rows its kernel leaves to the host. Handed in by
// the caller because the sampler lives above the backends. row_max: the row's largest logit or NaN.
using HostDraw = std::function<int32_t(const float* logits, int64_t vocab, const DrawParams& params, float row_max)>;

// Linear-layer weights stored as F8_E4M3 or I8 (or I4, below) values [n][k] with fp32 scales (model/quantization.h):
// weight[r][c] = value[r][c] * scales[r * groups + (c + phase) / group]. Every output row carries
// its own row of scales, so any split or concatenation of rows (tensor parallelism, fused q|k|v)
// keeps them exact; `phase` is where column 0 falls in its group when the columns are a slice
// (row-parallel layers) that does not start on a group boundary. 4-bit weights: I4 values [n][(k +
// 1) / 2] (two a byte, low nibble first) with F32 zero points laid out as the scales:
// weight[r][c] = (value[r][c] - zeros[i]) * scales[i], i = r * groups + (c + phase) / group.
struct ScaledWeightView {
  BufferView values;
  BufferView scales;
  int64_t groups = 1, group = 1, phase = 0;
  BufferView zeros;  // I4 values only
  // I8 values only, optional: F32 [m], each row of x's max |x| over the whole row when x holds a
  // slice of its columns (int8_row_amax combined over the ranks); empty: the slice's own.
  BufferView input_amax;
};

// Words of 64 token bits one row of a vocabulary shard's mask takes (Backend::mask_logits' bits).
constexpr int64_t mask_words_per_row(int64_t vocab_shard) { return (vocab_shard + 63) / 64; }

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual DType activation_dtype() const = 0;  // model/run_dtypes.h's rule states it for `plan`

  // ---- memory -------------------------------------------------------------------------------
  // `count` elements of `dtype`, zero-filled. Throws Error when the memory is not there.
  virtual Buffer alloc(size_t count, DType dtype) = 0;
  virtual void upload(BufferView dst, const void* src, size_t bytes) = 0;
  // Waits for the work queued before it, then copies to host memory.
  virtual void download(BufferView src, void* dst, size_t bytes) = 0;
  virtual void synchronize() = 0;
  // Runs fn on host-addressable memory holding [view, view + bytes): the buffer itself on the CPU,
  // a staged host copy on CUDA (copied back afterwards when `write`). How host transports (MPI)
  // reach backend buffers.
  virtual void host_access(BufferView view, size_t bytes, bool write, const std::function<void(void*)>& fn) = 0;
  // Bytes this backend can still allocate (device memory free; host MemAvailable): KV sizing.
  virtual size_t memory_available() const = 0;

  // ---- the step ---------------------------------------------------------------------------
  // Sends the step's ids, positions, block tables and logit requests to the backend, once per
  // step; embedding, rope, paged_attention, gather_logit_rows and logit_stats read them.
  virtual void begin_step(const StepBatch& step) = 0;

  // ---- compute ----------------------------------------------------------------------------
  // y[m,n] = x[m,k] · w[n,k]ᵀ (w in Hugging Face [out, in] layout, any weight dtype; y in the
  // activation dtype or F32).
  virtual void matmul_nt(BufferView x, BufferView w, BufferView y, int64_t m, int64_t n, int64_t k) = 0;
  // The same with quantized weights: F8_E4M3 and I4 values dequantized a slice at a time inside
  // the GEMM, I8 (W8A8) with x quantized to int8 per row. Only for the value dtypes where
  // runs_quantized_weights(values) holds; the loader refuses the others, naming the tensor.
  virtual bool runs_quantized_weights(DType /*values*/) const { return false; }
  virtual void matmul_nt_scaled(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n,
                                int64_t k);
  // amax[i] = max_c |x[i][c]| (F32 [m]; +inf for a row holding a NaN or an infinity): the number the
  // I8 GEMM scales row i of its input by. Where runs_quantized_weights(DType::I8).
  virtual void int8_row_amax(BufferView x, BufferView amax, int64_t m, int64_t k);
  // x[m,n] += bias[n]
  virtual void add_bias(BufferView x, BufferView bias, int64_t m, int64_t n) = 0;
  // x[i] += y[i]
  virtual void add(BufferView x, BufferView y, size_t count) = 0;
  // out[m,n] = rmsnorm(x[m,n]) * w
  virtual void rmsnorm(BufferView x, BufferView w, BufferView out, int64_t m, int64_t n, float eps) = 0;
  // Fused residual add + RMSNorm: x += residual, then out = rmsnorm(x) * w (one pass over x).
  virtual void add_rmsnorm(BufferView x, BufferView residual, BufferView w, BufferView out, int64_t m, int64_t n,
                           float eps) = 0;
  // Rotate-half RoPE in place on `heads` heads of each of the step's rows (row stride in
  // elements), at the step's positions. inv_freq holds one or more tables of head_dim / 2
  // frequencies; a row uses the step's rope_tables entry (the caller keeps it within inv_freq).
  virtual void rope(BufferView x, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView inv_freq) = 0;
  // out[m,i] = silu(gu[m,i]) * gu[m, inter+i]
  virtual void silu_mul(BufferView gu, BufferView out, int64_t m, int64_t inter) = 0;
  // Writes the step's k/v rows into the cache, then causal attention of q over the cache, for
  // the step's sequences. q: [rows][q_heads*head_dim] (row stride q_stride), k/v likewise with
  // kv_heads (stride kv_stride); out: [rows][q_heads*head_dim].
  virtual void paged_attention(BufferView q, int64_t q_stride, BufferView k, BufferView v, int64_t kv_stride,
                               BufferView k_cache, BufferView v_cache, const KvLayout& kv, int64_t q_heads,
                               BufferView out) = 0;
  // out[i,:] = table[ids[i]-vocab_begin,:] for the step's ids in [vocab_begin, vocab_end), else 0.
  virtual void embedding(BufferView table, int64_t vocab_begin, int64_t vocab_end, int64_t dim, BufferView out) = 0;
  // out[i,:] = x[logit_rows[first + i], :] for i < count (rows of `dim` elements, same dtype).
  virtual void gather_logit_rows(BufferView x, int64_t dim, int64_t first, int64_t count, BufferView out) = 0;
  // dst[i*dst_stride ..+width] = src[rows[i]*src_stride ..+width], same dtype (rows: host indices).
  virtual void copy_rows(BufferView src, int64_t src_stride, std::span<const int64_t> rows, int64_t width,
                         BufferView dst, int64_t dst_stride) = 0;
  // Row i < rows of F32 logits [rows][vocab_shard] keeps logit j where bit j % 64 of word
  // bits[i * mask_words_per_row(vocab_shard) + j / 64] is set and becomes -inf elsewhere (bits: I64, as
  // TokenMaskBits::write_shard_words writes them): constrained rows masked on their vocabulary
  // shard with 1 bit a token crossing to the backend.
  virtual void mask_logits(BufferView logits, int64_t rows, int64_t vocab_shard, BufferView bits) = 0;
  // Per row i < count of F32 logits [count][vocab_shard]: LogitStats into stats (16 bytes a row,
  // a buffer of 4*count F32), the target being logit_targets[first + i] (global ids).
  virtual void logit_stats(BufferView logits, int64_t count, int64_t vocab_shard, int64_t vocab_begin, int64_t first,
                           BufferView stats) = 0;
  // The sampled draw where the logits are: out[i] = the token host_draw would pick from row rows[i]
  // of F32 logits [..][vocab] with params[i] (exactly engine/sampler_reference.h's token), and its
  // logit. row_max[i]: that row's largest logit if known, else NaN (a hint). Waits for the queued
  // work; on CUDA only the tokens cross the bus, save rows the kernel cannot decide (a NaN logit,
  // a maximum that is not finite, a sum too close to a threshold to trust), which are downloaded
  // and drawn by host_draw.
  virtual void sample_rows(BufferView logits, int64_t vocab, std::span<const int64_t> rows,
                           std::span<const DrawParams> params, std::span<const float> row_max,
                           const HostDraw& host_draw, std::span<DrawnToken> out) = 0;

  // ---- model families beyond Llama ---------------------------------------------
  // Per-head RMSNorm in place: each of `heads` heads (head_dim elements, w [head_dim] F32) of each
  // of `rows` rows (row stride in elements) becomes rmsnorm(head) * w (Qwen3 / Gemma 3 q/k norms).
  virtual void rmsnorm_heads(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim,
                             BufferView w, float eps) = 0;
  // out[m,i] = gelu_tanh(gu[m,i]) * gu[m, inter+i] (Gemma's GeGLU, HF's gelu_pytorch_tanh).
  virtual void gelu_tanh_mul(BufferView gu, BufferView out, int64_t m, int64_t inter) = 0;
  // x[i] *= factor (Gemma's embedding scale).
  virtual void scale(BufferView x, size_t count, float factor) = 0;
  // x[i] = cap * tanh(x[i] / cap) (Gemma 2's final-logit soft-capping).
  virtual void softcap(BufferView x, size_t count, float cap) = 0;

  // ---- mixture of experts (Mixtral, Qwen3-MoE) -----------------------------------
  // out[i,:] = sum over j < k of weights[i*k + j] * src[rows[i*k + j], :], for i < rows.size() / k
  // (rows of `width` elements, activation dtype; rows and weights are host arrays): each token's
  // k expert outputs, weighted by the router, summed in j order in F32 (no atomics: the same
  // result on every run and every rank).
  virtual void weighted_row_sum(BufferView src, std::span<const int64_t> rows, std::span<const float> weights,
                                int64_t k, int64_t width, BufferView out) = 0;

 protected:
  friend class Buffer;
  virtual void release(void* data, size_t bytes) noexcept = 0;
};

// The CPU backend. checked: backend memory is mapped PROT_NONE outside backend calls, so any host
// access that bypasses download()/host_access() crashes (the tests' guard for the CUDA path).
// TPBATCH_CHECKED_BACKEND=1 in the environment turns it on too.
struct CpuBackendOptions {
  bool checked = false;
};
std::unique_ptr<Backend> make_cpu_backend(CpuBackendOptions options = {});

}  // namespace tpbatch
