#pragma once
// The compute a model shard needs, behind one interface: the CPU backend (BLAS + plain loops,
// the reference) and the CUDA backend (cuBLAS + kernels/). Pointers are backend memory.
// Shapes are row-major; "tokens" are the rows of one engine step (all sequences' chunks).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tpbatch {

// One sequence's slice of an engine step, as the attention kernel sees it.
struct AttentionSeq {
  int64_t row_begin = 0;        // first row of the step that belongs to this sequence
  int64_t num_rows = 0;         // tokens of this sequence in the step (a prefill chunk, or 1)
  int64_t pos_begin = 0;        // position of the first of them (tokens before are in the cache)
  const int32_t* blocks = nullptr;  // block table: KV cache blocks holding positions 0.. in order
  int64_t num_blocks = 0;
};

// Paged KV cache geometry of one layer: [num_blocks][kv_heads][block_size][head_dim] for K and V.
struct KvLayout {
  int64_t num_blocks = 0;
  int64_t kv_heads = 0;
  int64_t block_size = 16;
  int64_t head_dim = 0;
  int64_t window = 0;           // sliding-window attention: a query sees the last `window` positions; 0 = all
  size_t floats_per_layer() const { return static_cast<size_t>(num_blocks * kv_heads * block_size * head_dim); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // y[m,n] = x[m,k] · w[n,k]ᵀ  (w in Hugging Face [out, in] layout).
  virtual void matmul_nt(const float* x, const float* w, float* y, int64_t m, int64_t n, int64_t k) = 0;
  // out[m,n] = rmsnorm(x[m,n]) * w
  virtual void rmsnorm(const float* x, const float* w, float* out, int64_t m, int64_t n, float eps) = 0;
  // x[m,n] += bias[n]
  virtual void add_bias(float* x, const float* bias, int64_t m, int64_t n) = 0;
  // x[i] += y[i]
  virtual void add(float* x, const float* y, size_t count) = 0;
  // Rotate-half RoPE in place on `heads` heads of each row (row stride in floats).
  virtual void rope(float* x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim,
                    const int32_t* positions, const float* inv_freq) = 0;
  // out[m,i] = silu(gu[m,i]) * gu[m, inter+i]
  virtual void silu_mul(const float* gu, float* out, int64_t m, int64_t inter) = 0;
  // Writes the step's k/v rows into the cache, then causal attention of q over the cache.
  // q: [rows][q_heads*head_dim] (row stride q_stride), k/v likewise with kv_heads; out: [rows][q_heads*head_dim].
  virtual void paged_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                               float* k_cache, float* v_cache, const KvLayout& kv, int64_t q_heads,
                               const AttentionSeq* seqs, int64_t num_seqs, float* out) = 0;
  // out[i,:] = table[ids[i]-vocab_begin,:] if the id is in [vocab_begin, vocab_end), else 0.
  virtual void embedding(const int32_t* ids, int64_t count, const float* table, int64_t vocab_begin,
                         int64_t vocab_end, int64_t dim, float* out) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace tpbatch
