#pragma once
// The bytes one rank's shard occupies, from shapes alone: what load_llama_shard and ModelRunner
// allocate, and what `tpbatch plan` counts, so the plan and the run's start-up lines agree by
// construction (tests/unit/test_shard_bytes.cpp checks them against loaded shards).
#include <cstdint>

#include "backend/dtype.h"
#include "model/config.h"
#include "model/llama_shard.h"

namespace tpbatch {

// Weight bytes of a placement, as LlamaShard::weight_bytes() counts a loaded shard: linear layers
// and the embedding / LM head in `weight_dtype` (a quantized checkpoint's projections: one byte
// each (fp8) or two a byte (4-bit), and their F32 scales and 4-bit zero points,
// model/quantization.h); norms, biases and the RoPE tables in F32.
int64_t shard_weight_bytes(const ModelConfig& config, const ShardPlacement& placement, DType weight_dtype);

// Of those, the mixture-of-experts layers' routers and the experts the rank holds (its slice of
// each under parallel.experts: tensor, whole experts under expert): 0 for a dense model.
int64_t shard_expert_weight_bytes(const ModelConfig& config, const ShardPlacement& placement, DType weight_dtype);

// The CUDA backend's dequantize scratch on this shard (backend/dequantize_slices.h): a BF16 slice
// of the largest quantized projection it holds, bounded; 0 without quantized weights.
int64_t shard_dequantize_scratch_bytes(const ModelConfig& config, const ShardPlacement& placement);

// KV cache bytes per token of one rank: K and V, its KV heads (replicated when TP > KV heads),
// head_dim, for `layers` layers, in the cache dtype.
int64_t kv_bytes_per_token_of_rank(const ModelConfig& config, int tensor, int tp_rank, int64_t layers, DType kv_dtype);

}  // namespace tpbatch
