#pragma once
// Megatron shard arithmetic: which slice of the heads, the MLP width, the vocabulary and the layers
// one rank of a tensor-parallel group or pipeline keeps. Pure arithmetic on the ModelConfig, shared
// by the loader, the model runner, the shard's byte counts and `plan`.
#include <cstdint>

#include "model/config.h"

namespace tpbatch {

// Uneven splits are balanced: rank r of n gets [r*len/n, (r+1)*len/n).
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range balanced_split(int64_t len, int parts, int index);

// KV heads a tensor-parallel rank keeps: its own slice when TP <= KV heads, else one head
// replicated TP / KV times (as vLLM does).
Range kv_heads_of_rank(const ModelConfig& config, int tensor, int tp_rank);

// Contiguous layer ranges per pipeline stage (earlier stages take the extra layers).
Range layers_of_stage(int64_t num_layers, int pipeline, int stage);

}  // namespace tpbatch
