#pragma once
// The decode-shaped attention tile (few queries: a decode row, or a short chunk, times its GQA group)
// for CPUs with AVX2 + FMA. paged_attention (paged_attention.cpp) sends each tile of at most
// kDecodeTileMaxQueries queries here when decode_kernel_enabled(), every other tile to the portable
// flash-style kernel.
//
// Why a second kernel: the portable one transposes each K block so that scores are block-wide FMAs,
// which pays off over many queries; a decode tile has 1 x group (e.g. 3) queries, and the transpose
// (block_size x head_dim scalar moves) cost several times its math. Here scores come straight from
// the K rows (3 queries x 4 positions of ymm accumulators over head_dim, one horizontal sum per
// position group), the softmax uses the vectorised exp of vector_exp.h, and the online-softmax
// max/correction update runs once per chunk of several blocks (kDecodeChunkPositions), not per block.
#include <cstdint>

#include "backend/backend.h"

namespace tpbatch::cpu::detail {

// Tiles of up to this many queries (rows x group) take the decode kernel. 8 covers a decode row of
// GQA groups up to 8 and 2-row chunks of group 3-4; bigger tiles amortise the portable kernel's
// transpose (measured: benchmarks/attention_bench.cpp).
inline constexpr int64_t kDecodeTileMaxQueries = 8;

// The CPU has AVX2 + FMA, and no test has switched the kernel off.
bool decode_kernel_enabled();
// For tests: false sends every tile to the portable kernel, so it stays tested on AVX2 machines.
void set_decode_kernel_enabled(bool on);

// One tile: query rows [r0, r1) of sequence s, for kv heads [h0, h1) and the query heads of their
// groups, queries multiplied by `scale` (the softmax scale); writes their rows of `out`. The cache
// already holds the step's keys and values. Several kv heads per tile read each block's K (and V) as
// one contiguous run (the heads of a block are adjacent) instead of scattered one-head pieces. Call
// only when decode_kernel_enabled().
void attend_decode_tile(const float* q, int64_t q_stride, const float* k_cache, const float* v_cache,
                        const KvLayout& kv, int64_t q_heads, const AttentionSeq& s, int64_t h0, int64_t h1,
                        int64_t r0, int64_t r1, float scale, float* out);
void attend_decode_tile(const float* q, int64_t q_stride, const uint16_t* k_cache, const uint16_t* v_cache,
                        const KvLayout& kv, int64_t q_heads, const AttentionSeq& s, int64_t h0, int64_t h1,
                        int64_t r0, int64_t r1, float scale, float* out);

// vexp::exp8 over n floats (n any; the tail by vexp::exp_scalar), for the tests. AVX2 CPUs only.
void exp_avx2(const float* x, float* y, int64_t n);

}  // namespace tpbatch::cpu::detail
