#pragma once
// The thinking budget (sampling.max_reasoning_tokens): a row whose open <think> block holds that
// many generated tokens gets </think> as its next token. The block is open when the last of
// <think> / </think> among the row's tokens (prompt and generated) is <think>: Qwen3-Thinking and
// DeepSeek-R1 templates open it in the prompt, Qwen3 with thinking on generates it. A row that
// never opens one is not touched. The output processor asks forces_end_of_reasoning before it
// picks a token and tells track_reasoning every token it appends.
#include <cstdint>
#include <optional>

#include "engine/sequence.h"
#include "tokenizer/tokenizer.h"

namespace tpbatch {

struct ThinkTokens {
  int32_t open_id, close_id;
};

// <think> and </think> when each is one token of the tokenizer below vocab_limit (the model's
// vocabulary), else nullopt: no budget can be kept.
std::optional<ThinkTokens> think_tokens_of(const Tokenizer& tok, int64_t vocab_limit);

// Starts keeping s's budget (its prompt in s.tokens): whether the prompt left a block open.
void start_think_block(Sequence& s, ThinkTokens think);

// Whether s's next token must be </think>: its budget is spent inside an open block.
bool forces_end_of_reasoning(const Sequence& s);

// Whether s is inside its <think> block now (tracked for rows with a budget or a reasoning
// parser): what is generated there is reasoning, so output constraints start only once it is false.
bool inside_reasoning(const Sequence& s);

// After a token is appended: a <think> opens the block, a </think> closes it, any other token in
// an open block counts against the budget.
void track_reasoning(Sequence& s, int32_t token);

}  // namespace tpbatch
