#include "engine/reasoning_budget.h"

#include <string>

#include "engine/reasoning_parser.h"

namespace tpbatch {

std::optional<ThinkTokens> think_tokens_of(const Tokenizer& tok, int64_t vocab_limit) {
  auto one_token = [&](std::string_view text) -> std::optional<int32_t> {
    const std::vector<int32_t> ids = tok.encode(text, false);
    if (ids.size() != 1 || ids[0] < 0 || ids[0] >= vocab_limit) return std::nullopt;
    return ids[0];
  };
  const std::optional<int32_t> open = one_token(kThinkOpen), close = one_token(kThinkClose);
  if (!open || !close || *open == *close) return std::nullopt;
  return ThinkTokens{*open, *close};
}

void start_think_block(Sequence& s, ThinkTokens think) {
  s.think = ThinkBlock{};
  s.think.open_id = think.open_id;
  s.think.close_id = think.close_id;
  for (auto it = s.tokens.rbegin(); it != s.tokens.rend(); ++it) {
    if (*it == think.open_id || *it == think.close_id) {
      s.think.open = *it == think.open_id;
      break;
    }
  }
  for (int32_t t : s.tokens) s.think.ended = s.think.ended || t == think.close_id;
}

bool forces_end_of_reasoning(const Sequence& s) {
  const int64_t budget = s.sampling.max_reasoning_tokens;
  return s.think.close_id >= 0 && budget != kNoReasoningBudget && s.think.open && s.think.tokens >= budget;
}

bool inside_reasoning(const Sequence& s) { return s.think.close_id >= 0 && s.think.open; }

void track_reasoning(Sequence& s, int32_t token) {
  if (s.think.close_id < 0) return;
  if (token == s.think.open_id) {
    s.think.open = true;
    s.think.tokens = 0;
  } else if (token == s.think.close_id) {
    s.think.open = false;
    s.think.ended = true;
  } else if (s.think.open) {
    ++s.think.tokens;
  }
}

}  // namespace tpbatch
