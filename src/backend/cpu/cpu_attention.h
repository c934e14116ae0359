#pragma once
// Paged causal attention on the CPU over the KV cache's block tables (F32 or BF16 cache): the
// reference every CUDA attention kernel is checked against.
#include <cstdint>

#include "backend/backend.h"

namespace tpbatch::cpu {

// Appends the step's k/v rows to the cache, then attends every row of every sequence.
void paged_attention(const float* q, int64_t q_stride, const float* k, const float* v, int64_t kv_stride,
                     void* k_cache, void* v_cache, const KvLayout& kv, int64_t q_heads, const AttentionSeq* seqs,
                     int64_t num_seqs, float* out);

}  // namespace tpbatch::cpu
