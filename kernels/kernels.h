#pragma once
// Host-side launchers of the CUDA kernels in kernels/*.cu. One concept per file, each written
// plainly (llm.c style) and named after its CPU twin in src/backend/cpu/ (the Backend method of
// the same name), which tests/gpu/test_cuda_kernels.cpp checks it against. Views are device
// memory; activations are F32 or BF16 (BF16 is what the CUDA backend computes in), every kernel
// does its arithmetic in fp32, and every launcher is asynchronous on `stream`. A dtype a kernel
// does not support throws Error naming the operation and the operand.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "backend/backend.h"
#include "backend/buffer.h"

namespace tpbatch::kernels {

// ---- the step, as begin_step() uploaded it (device pointers into one step buffer) ----------

// Per row of the step: its position (-1: the row belongs to no sequence), the offset of its
// sequence's block table in StepView::tables, and that table's length.
struct AttentionRow {
  int32_t pos;
  int32_t table_offset;
  int32_t num_blocks;
};

// Attention tiles hold 2^i consecutive rows of one sequence, i < kTileShapes (1..16 rows).
inline constexpr int kTileShapes = 5;
inline constexpr int kMaxTileQueries = 16;  // (rows x q heads) per attention thread block

struct StepView {
  int64_t rows = 0, num_seqs = 0, num_logit_rows = 0;
  const int32_t* tokens = nullptr;            // [rows]
  const int32_t* positions = nullptr;         // [rows]
  const int32_t* rope_tables = nullptr;       // [rows]: rope's frequency table per row; null: all the first
  const AttentionRow* attn_rows = nullptr;    // [rows]
  const int32_t* tables = nullptr;            // the sequences' block tables, concatenated
  const int32_t* seq_row_begin = nullptr;     // [num_seqs]
  const int32_t* seq_num_rows = nullptr;      // [num_seqs]
  const int32_t* tile_prefix = nullptr;       // [kTileShapes][num_seqs + 1]: tiles before sequence s
  const int32_t* logit_rows = nullptr;        // [num_logit_rows]
  const int32_t* logit_targets = nullptr;     // [num_logit_rows]
};

// How paged_attention() cuts the work: tile shape (2^tile_shape rows x heads_per_tile q heads of
// one kv head) and how many thread blocks share one tile's context (flash-decoding splits).
struct AttentionGrid {
  int tile_shape = 0;      // log2 of the rows per tile
  int64_t heads_per_tile = 1;
  int64_t head_chunks = 1;  // q-head groups of heads_per_tile per kv head
  int64_t tiles = 0;        // tiles over all sequences (StepView::tile_prefix[tile_shape][num_seqs])
  int64_t splits = 1;
};
// The grid for `group` q heads per kv head: the tile shape that fits kMaxTileQueries queries,
// tiles_by_shape[tile_shape] tiles, and splits of the context (each at least two 16-position K/V
// blocks long, at most 64) until there are about two thread blocks per SM: batch-1 decode gets
// the whole GPU, large prefill steps are not split. max_span: the longest context a tile sees.
AttentionGrid attention_grid(int64_t group, int64_t kv_heads, const int64_t* tiles_by_shape, int64_t max_span,
                             int sms);
// Floats of scratch paged_attention() needs with `splits` > 1 (0 otherwise).
size_t attention_scratch_floats(int64_t rows, int64_t q_heads, int64_t head_dim, int64_t splits);

// ---- kernels -----------------------------------------------------------------------------

// elementwise.cu — x[i] += y[i].  CPU: CpuBackend::add.
void add(BufferView x, BufferView y, size_t count, cudaStream_t stream);
// elementwise.cu — x[m,n] += bias[n] (bias F32).  CPU: CpuBackend::add_bias.
void add_bias(BufferView x, BufferView bias, int64_t m, int64_t n, cudaStream_t stream);
// elementwise.cu — x[i] *= factor (CpuBackend::scale); x[i] = cap * tanh(x[i] / cap) (CpuBackend::softcap).
void scale(BufferView x, size_t count, float factor, cudaStream_t stream);
void softcap(BufferView x, size_t count, float cap, cudaStream_t stream);

// weighted_row_sum.cu — out[i,:] = sum_j weights[i*k+j] * src[rows[i*k+j],:] in F32, j in order
// (mixture of experts: each token's k expert outputs); rows and weights in device memory, m rows.
// CPU: cpu::weighted_row_sum.
void weighted_row_sum(BufferView src, const int32_t* rows, const float* weights, int64_t m, int64_t k, int64_t width,
                      BufferView out, cudaStream_t stream);

// rmsnorm.cu — per-head RMSNorm in place (Qwen3 / Gemma 3 q/k norms), w [head_dim] F32.
// CPU: CpuBackend::rmsnorm_heads.
void rmsnorm_heads(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView w,
                   float eps, cudaStream_t stream);
// rmsnorm.cu — out[m,n] = x * rsqrt(mean(x^2) + eps) * w.  CPU: CpuBackend::rmsnorm.
void rmsnorm(BufferView x, BufferView w, BufferView out, int64_t m, int64_t n, float eps, cudaStream_t stream);
// rmsnorm.cu — fused residual add + RMSNorm: x += residual (rounded to x's dtype), then
// out = rmsnorm(x) * w, one read of x and residual.  CPU: CpuBackend::add_rmsnorm.
void add_rmsnorm(BufferView x, BufferView residual, BufferView w, BufferView out, int64_t m, int64_t n, float eps,
                 cudaStream_t stream);

// rope.cu — rotate-half RoPE in place at the step's positions.  CPU: CpuBackend::rope.
void rope(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView inv_freq,
          const StepView& step, cudaStream_t stream);

// silu_mul.cu — out[m,i] = silu(gu[m,i]) * gu[m,inter+i].  CPU: CpuBackend::silu_mul.
void silu_mul(BufferView gu, BufferView out, int64_t m, int64_t inter, cudaStream_t stream);
// silu_mul.cu — out[m,i] = gelu_tanh(gu[m,i]) * gu[m,inter+i] (Gemma's GeGLU).
// CPU: CpuBackend::gelu_tanh_mul.
void gelu_tanh_mul(BufferView gu, BufferView out, int64_t m, int64_t inter, cudaStream_t stream);

// embedding.cu — vocab-masked lookup at the step's tokens: out[i,:] = table[id-vocab_begin,:] or
// 0 outside the shard's range.  CPU: CpuBackend::embedding.
void embedding(BufferView table, int64_t vocab_begin, int64_t vocab_end, int64_t dim, BufferView out,
               const StepView& step, cudaStream_t stream);

// gather_rows.cu — out[i,:] = x[logit_rows[first+i],:] (any 2- or 4-byte dtype).
// CPU: CpuBackend::gather_logit_rows.
void gather_logit_rows(BufferView x, int64_t dim, int64_t first, int64_t count, BufferView out, const StepView& step,
                       cudaStream_t stream);

// mask_logits.cu — rows of F32 logits [rows][vocab_shard] set to -inf where their bit is clear
// (bits: I64 [rows][ceil(vocab_shard / 64)]).  CPU: CpuBackend::mask_logits.
void mask_logits(BufferView logits, int64_t rows, int64_t vocab_shard, BufferView bits, cudaStream_t stream);
// logit_stats.cu — per row of a vocabulary shard's F32 logits: max, lowest-id argmax (global id
// = vocab_begin + j), sum of exp(l - max), and the logit of the target logit_targets[first+i]
// (NaN unless it lies in the shard). Each row is cut into `splits` spans of `span` logits (a
// multiple of 1024), one thread block each, whose partials a second kernel merges: `scratch`
// holds at least logit_stats_scratch_bytes().  CPU: CpuBackend::logit_stats.
struct LogitStatsGrid {
  int64_t splits = 1;  // thread blocks per row
  int64_t span = 0;    // logits per block (the last block of a row may have fewer)
};
// About four blocks per SM over `count` rows, no block under 1024 logits.
LogitStatsGrid logit_stats_grid(int64_t count, int64_t vocab_shard, int sms);
size_t logit_stats_scratch_bytes(int64_t count, const LogitStatsGrid& grid);
void logit_stats(BufferView logits, int64_t count, int64_t vocab_shard, int64_t vocab_begin, int64_t first,
                 BufferView stats, const LogitStatsGrid& grid, void* scratch, const StepView& step,
                 cudaStream_t stream);

// sample_rows.cu — the sampled draw of rows[i] (device int64) of F32 logits [..][vocab] with
// params[i] (device): out[i] (device) = the token sample_token_reference returns and its logit,
// or token -1 where the kernel leaves the row to the host (a NaN or non-finite maximum, a cut in
// the tail, a sum within 1e-9 of a threshold). One block per row; `scratch` holds at least
// sample_rows_scratch_bytes(count, vocab).  CPU: CpuBackend::sample_rows.
int64_t sample_rows_span(int64_t vocab);
size_t sample_rows_scratch_bytes(int64_t count, int64_t vocab);
void sample_rows(BufferView logits, int64_t vocab, const int64_t* rows, const DrawParams* params, int64_t count,
                 void* scratch, DrawnToken* out, cudaStream_t stream);

// paged_attention.cu — appends the step's k/v rows into the paged caches
// ([num_blocks][kv_heads][block_size][head_dim], F32 or BF16).  CPU: step 1 of
// CpuBackend::paged_attention.
void kv_append(BufferView k, BufferView v, int64_t kv_stride, BufferView k_cache, BufferView v_cache,
               const KvLayout& kv, const StepView& step, cudaStream_t stream);
// paged_attention.cu — causal GQA attention of every row over its sequence's cache (positions
// first..pos, first = pos-window+1 with a sliding window; scores scaled by KvLayout::scale, or
// 1/sqrt(head_dim), and soft-capped when KvLayout::softcap > 0). One thread block per (tile, kv head,
// split): the K/V of each 16-position block are read once into shared memory for every query of
// the tile (rows x q heads sharing the kv head); with splits > 1 each block covers a slice of the
// context and a second kernel merges the slices' (max, sum, output).  `scratch`: at least
// attention_scratch_floats() floats.  CPU: step 2 of CpuBackend::paged_attention.
void paged_attention(BufferView q, int64_t q_stride, BufferView k_cache, BufferView v_cache, const KvLayout& kv,
                     int64_t q_heads, BufferView out, const AttentionGrid& grid, float* scratch, const StepView& step,
                     cudaStream_t stream);

// dequantize.cu — rows [r0, r0 + rows) of quantized weights (backend.h's ScaledWeightView:
// F8_E4M3, or I4 with zero points) of k columns into `out`, BF16 [rows][k]: value * scale or
// (value - zero) * scale in fp32, rounded to bf16.  CPU: dequant_fp8_portable /
// dequant_int4_portable (src/backend/cpu/gemm/gemm_dequant.cpp).
void dequantize_rows(const ScaledWeightView& w, int64_t r0, int64_t rows, int64_t k, BufferView out,
                     cudaStream_t stream);
// quantized_gemv.cu — y[m,n] = x[m,k] · wᵀ for m <= kQuantizedGemvMaxRows (decode), the weights
// dequantized in registers to the fp32 values dequantize_rows rounds, fp32 accumulation; x and y
// F32 or BF16.  CPU: quant_rows_m1 (src/backend/cpu/gemm/quant_rows_m1.h).
inline constexpr int kQuantizedGemvMaxRows = 8;
void quantized_gemv(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n, int64_t k,
                    cudaStream_t stream);

// int8_gemm.cu — W8A8 (I8 weights, one F32 scale per output row): int8_quantize_rows quantizes
// each row of x (F32 or BF16) to int8 with scale amax / 127 into xq [m][k] and xscale [m], amax
// the row's own max |x| or, where input_amax is given, the whole row's (a row-parallel slice);
// int8_gemm then writes y[i][j] = float(sum_c xq[i][c] * w[j][c]) * xscale[i] * wscale[j] (y F32
// or BF16); int8_row_amax: amax[i] = max_c |x[i][c]|, +inf for a row with a NaN or an infinity.
// CPU: gemm_nt_int8 / int8_row_amax (src/backend/cpu/gemm/gemm_int8.cpp), bit for bit on F32 x.
void int8_row_amax(BufferView x, BufferView amax, int64_t m, int64_t k, cudaStream_t stream);
void int8_quantize_rows(BufferView x, const float* input_amax, int8_t* xq, float* xscale, int64_t m, int64_t k,
                        cudaStream_t stream);
void int8_gemm(const int8_t* xq, const float* xscale, const int8_t* w, const float* wscale, BufferView y, int64_t m,
               int64_t n, int64_t k, cudaStream_t stream);

// convert.cu — element-wise dtype conversion (F32/BF16/F16, round to nearest even): the GEMM's
// operand conversions.  CPU: bf16_to_f32 / f32_to_bf16 / f16 twins in backend/dtype.h.
void convert(BufferView in, BufferView out, size_t count, cudaStream_t stream);

}  // namespace tpbatch::kernels
