#pragma once
// The scheduler's side of automatic prefix caching: how much of a sequence the cache may serve,
// and whether a sequence should wait a step because a running one is computing the very blocks it
// could share (rows that arrive together with a common few-shot prefix would otherwise all compute
// it in the same step, before any of them has published it).
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/sequence.h"

namespace tpbatch {

// Tokens of `s` the prefix cache may serve: whole blocks, never the last token (the step needs its
// logits), and none for rows that need every position's output (scoring, embeddings) or turn by
// longrope's long factors (the cache holds keys turned by the short ones).
int64_t prefix_cache_limit(const Sequence& s, int64_t block_size);

// True when a running, unfinished sequence holds the same tokens as `s` up to the end of the block
// that starts at `cached` (a block `s` may take, cached < limit) and has not computed that block
// yet: once it has, the block is in the cache (unless it turns by longrope's long factors: never).
bool prefix_block_being_computed(const Sequence& s, int64_t cached, int64_t limit,
                                 const std::vector<std::unique_ptr<Sequence>>& running, int64_t block_size);

}  // namespace tpbatch
