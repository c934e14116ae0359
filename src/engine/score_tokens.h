#pragma once
// Score rows' tokenization as lm-evaluation-harness does it.
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tpbatch {

// A score row's tokens the way lm-evaluation-harness makes them (HFLM._encode_pair): the
// context's trailing whitespace moves to the front of the continuation, context + continuation is
// encoded as one text, and the continuation's tokens are the ones after the context's own encoding
// (so " Paris" after "... is" is the single token "▁Paris", as in the whole sentence). The model
// reads context + continuation; the continuation tokens are scored.
struct ScoreTokens {
  std::vector<int32_t> context;       // encode(context, add_bos)
  std::vector<int32_t> continuation;  // encode(context + continuation, add_bos)[len(context):]
};
ScoreTokens lm_eval_score_tokens(const Tokenizer& tok, std::string_view context, std::string_view continuation,
                                 bool add_bos);

}  // namespace tpbatch
