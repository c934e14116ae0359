#pragma once
// Paged causal attention on the CPU over the KV cache's block tables (F32 or BF16 cache): the
// reference every CUDA attention kernel is checked against.
#include <cstdint>

#include "backend/backend.h"

namespace tpbatch::cpu {

// Appends the step's k/v rows to the cache, then attends every row of every sequence. Flash-style:
// the work is split over (sequence, kv head, tile of query rows); each tile walks the cache blocks
// it can see once, for all its rows and all the query heads sharing that kv head (GQA), keeping an
// online softmax, so each K/V block is read (and widened from bf16) once per tile, not once per row
// and head. One OpenMP team over the tiles. Tiles of few queries (decode rows) go to the AVX2 decode
// kernel of decode_attention_tile.h where the CPU has it; decode batches then take all kv heads of a
// sequence per tile (each block's K and V read as one contiguous run).
void paged_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                     void* k_cache, void* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs,
                     int64_t num_seqs, float* out);

// The plain per-(row, head) loop (scores, softmax, weighted V): slow, obviously right; the tiled
// version and the CUDA kernels are tested against it. Same arguments and effect as paged_attention.
void paged_attention_reference(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                               void* k_cache, void* v_cache, const KvLayout& kv, int64_t q_heads,
                               const AttentionSeq* seqs, int64_t num_seqs, float* out);

}  // namespace tpbatch::cpu
