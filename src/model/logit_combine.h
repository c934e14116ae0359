#pragma once
// The vocab-parallel LM head's per-row results from its shards' statistics (LogitStats), without
// gathering the logits: each TP rank contributes one LogitStats a row, allgathered in vocabulary
// order.
#include <cstdint>
#include <span>

#include "backend/backend.h"
#include "model/step_inputs.h"

namespace tpbatch {

// all: [tp][stride] (row i of rank r at all[r * stride + i]). Rows [0, n) of each rank's block:
// the global argmax (the first maximum is the lowest id), the maximum, log Σexp over the whole
// vocabulary and the target logit, into results[0, n).
void combine_logit_stats(std::span<const LogitStats> all, int64_t stride, int64_t n, int tp, LogitResult* results);

// Rows [first, first + n) of each rank's block are masked rows (disallowed logits -inf): their
// lowest-id maximum over the allowed tokens, into results[i].allowed_argmax / allowed_max_logit.
// A shard with no allowed token has a maximum of -inf and never wins; when no shard has one the
// row's allowed_argmax is -1. Only max and argmax are read: log Σexp of a masked row is unused
// (the recorded logprob is the model's unmodified one) and undefined for an all -inf shard.
void combine_allowed_maxima(std::span<const LogitStats> all, int64_t stride, int64_t first, int64_t n, int tp,
                            std::span<LogitResult* const> results);

}  // namespace tpbatch
