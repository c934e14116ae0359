#include "engine/row_admitter.h"

#include <algorithm>
#include <chrono>
#include <numeric>

#include "common/error.h"
#include "io/input_row.h"

namespace tpbatch {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

RowResult error_row(int64_t index, const std::string& id, const std::string& why) {
  RowResult r;
  r.index = index;
  r.id = id;
  r.finish_reason = "error";
  r.error = why;
  return r;
}

RowResult to_result(const Sequence& s, bool logprobs) {
  RowResult r;
  r.index = s.row;
  r.id = s.id;
  r.finish_reason = s.finish_reason;
  r.error = s.error;
  const int64_t out_from = s.scoring ? s.score_from : s.prompt_len;
  const int64_t prompt_end = s.scoring ? s.prompt_len : s.prompt_len;
  r.prompt_tokens.assign(s.tokens.begin(), s.tokens.begin() + prompt_end);
  if (s.finish_reason == "error") return r;
  r.output_tokens.assign(s.tokens.begin() + out_from, s.tokens.end());
  r.output_text = s.text;
  if (logprobs || s.scoring) r.output_logprobs = s.logprobs;
  r.logprob_sum = std::accumulate(s.logprobs.begin(), s.logprobs.end(), 0.0);
  r.is_greedy = s.all_greedy ? 1 : 0;
  if (!s.scoring && s.num_generated() > 0) {
    r.ttft_seconds = std::chrono::duration<double>(s.first_token - s.arrived).count();
    if (s.num_generated() > 1)
      r.tpot_seconds = std::chrono::duration<double>(s.finished - s.first_token).count() / (s.num_generated() - 1);
  }
  return r;
}

std::unique_ptr<Sequence> RowAdmitter::admit(const WorkItem& item, std::vector<RowResult>& immediate) {
  InputRow row;
  try {
    // Token ids must index the model's embedding (and the tokenizer's vocabulary).
    row = parse_input_row(item.line, item.index, job_, std::min<int64_t>(tok_.vocab_size(), cfg_.vocab_size));
  } catch (const BadLine& bad) {
    if (job_.input.on_bad_line == "fail")
      throw Error(bad.reason + " (input.on_bad_line: fail)", kExitBadInput);
    immediate.push_back(error_row(item.index, bad.id, bad.reason));
    return nullptr;
  }
  auto s = std::make_unique<Sequence>();
  s->row = row.index;
  s->id = row.id;
  s->sampling = row.sampling;
  s->eos_ids = cfg_.eos_token_ids;
  s->arrived = Clock::now();
  s->tokens = row.tokens ? *row.tokens : tok_.encode(*row.text, true);
  for (int32_t id : s->tokens)
    if (id >= cfg_.vocab_size) {  // tokenizer.json has more tokens than the model's embedding
      immediate.push_back(error_row(row.index, row.id, "input line " + std::to_string(item.index + 1) +
                                    ": the tokenizer produced id " + std::to_string(id) +
                                    ", outside the model's vocabulary of " + std::to_string(cfg_.vocab_size)));
      return nullptr;
    }
  s->prompt_len = static_cast<int64_t>(s->tokens.size());
  const int64_t max_pos = cfg_.max_position_embeddings;
  const std::string line = "input line " + std::to_string(item.index + 1) + ": ";
  if (job_.task == "score") {
    s->scoring = true;
    if (row.completion) {
      const std::vector<int32_t> c = tok_.encode(*row.completion, false);
      s->tokens.insert(s->tokens.end(), c.begin(), c.end());
      s->score_from = s->prompt_len;
      if (s->prompt_len == 0) {
        immediate.push_back(error_row(row.index, row.id, line + "the prompt is empty and the tokenizer adds no BOS, "
                                      "so the completion's first token has no context to be scored in"));
        return nullptr;
      }
    } else {
      s->score_from = 1;  // perplexity of the prompt itself
    }
    if (static_cast<int64_t>(s->tokens.size()) > max_pos) {
      immediate.push_back(error_row(row.index, row.id, line + "prompt and completion have " +
                                    std::to_string(s->tokens.size()) + " tokens; the model's context is " +
                                    std::to_string(max_pos)));
      return nullptr;
    }
    if (s->tokens.empty()) {
      immediate.push_back(error_row(row.index, row.id, line + "the prompt has no tokens"));
      return nullptr;
    }
    if (s->score_from >= static_cast<int64_t>(s->tokens.size())) {
      s->finish_reason = "scored";  // nothing to score
      immediate.push_back(to_result(*s, true));
      return nullptr;
    }
    return s;
  }
  if (s->prompt_len == 0) {
    immediate.push_back(error_row(row.index, row.id, line + "the prompt has no tokens"));
    return nullptr;
  }
  if (s->prompt_len >= max_pos) {
    immediate.push_back(error_row(row.index, row.id, line + "prompt has " + std::to_string(s->prompt_len) +
                                  " tokens; the model's context is " + std::to_string(max_pos)));
    return nullptr;
  }
  s->max_len = s->prompt_len + std::min<int64_t>(row.sampling.max_new_tokens, max_pos - s->prompt_len);  // no overflow
  s->detokenizer = std::make_unique<IncrementalDetokenizer>(tok_, s->tokens);
  if (s->max_len <= s->prompt_len) {
    s->finish_reason = "length";
    immediate.push_back(to_result(*s, job_.output.logprobs));
    return nullptr;
  }
  return s;
}

}  // namespace tpbatch
