#include "engine/row_admitter.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>
#include <string_view>

#include <cstdio>

#include "common/error.h"
#include "io/input_row.h"
#include "job/chat_template_kwargs.h"

namespace tpbatch {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

RowResult error_row(int64_t index, const std::string& id, const std::string& why) {
  RowResult r;
  r.index = index;
  r.id = id;
  r.finish_reason = FinishReason::kError;
  r.error = why;
  return r;
}

RowResult to_result(const Sequence& s, bool logprobs) {
  RowResult r;
  r.index = s.row;
  r.line = s.line;
  r.sample = s.sample;
  r.id = s.id;
  r.warning_kind = s.warning_kind;
  r.warning = s.warning;
  r.finish_reason = s.finish_reason;
  r.error = s.error;
  r.prompt_tokens_cached = s.prompt_tokens_cached;
  const int64_t out_from = s.scoring ? s.score_from : s.prompt_len;
  const int64_t prompt_end = s.scoring ? s.prompt_len : s.prompt_len;
  r.prompt_tokens.assign(s.tokens.begin(), s.tokens.begin() + prompt_end);
  r.truncated_tokens = s.truncated_tokens;
  if (s.finish_reason == FinishReason::kError) return r;
  r.embedding = s.embedding_out;
  r.output_tokens.assign(s.tokens.begin() + out_from, s.tokens.end());
  r.output_text = s.text;
  if (logprobs || s.scoring) r.output_logprobs = s.logprobs;
  r.top_logprob_tokens = s.top_ids;
  r.top_logprobs = s.top_logprobs;
  r.logprob_sum = std::accumulate(s.logprobs.begin(), s.logprobs.end(), 0.0);
  r.is_greedy = s.all_greedy ? 1 : 0;
  if (!s.scoring && s.num_generated() > 0) {
    r.ttft_seconds = std::chrono::duration<double>(s.first_token - s.arrived).count();
    if (s.num_generated() > 1)
      r.tpot_seconds = std::chrono::duration<double>(s.finished - s.first_token).count() / (s.num_generated() - 1);
  }
  return r;
}

namespace {

// The length of the trailing whitespace of `text` as Python's str.rstrip() sees it (str.isspace:
// ASCII whitespace, \x1c-\x1f, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F, U+3000).
size_t trailing_whitespace_bytes(std::string_view text) {
  size_t end = text.size();
  for (;;) {
    if (end == 0) return text.size();
    const unsigned char c = static_cast<unsigned char>(text[end - 1]);
    if (c < 0x80) {
      if (c == ' ' || (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x1f)) {
        --end;
        continue;
      }
      return text.size() - end;
    }
    size_t start = end - 1;  // back to the lead byte of the last character
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    const std::string_view ch = text.substr(start, end - start);
    static const std::string_view spaces[] = {
        "\xC2\x85", "\xC2\xA0", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82", "\xE2\x80\x83",
        "\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87", "\xE2\x80\x88", "\xE2\x80\x89",
        "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F", "\xE3\x80\x80"};
    if (std::find(std::begin(spaces), std::end(spaces), ch) == std::end(spaces)) return text.size() - end;
    end = start;
  }
}

}  // namespace

ScoreTokens lm_eval_score_tokens(const Tokenizer& tok, std::string_view context, std::string_view continuation,
                                 bool add_bos) {
  const size_t n_spaces = trailing_whitespace_bytes(context);
  std::string cont;
  if (n_spaces > 0) {  // the context's trailing whitespace belongs to the continuation
    cont.assign(context.substr(context.size() - n_spaces));
    context = context.substr(0, context.size() - n_spaces);
  }
  cont.append(continuation);
  std::string whole(context);
  whole += cont;
  ScoreTokens out;
  out.context = tok.encode(context, add_bos);
  const std::vector<int32_t> whole_ids = tok.encode(whole, add_bos);
  if (whole_ids.size() > out.context.size())
    out.continuation.assign(whole_ids.begin() + static_cast<std::ptrdiff_t>(out.context.size()), whole_ids.end());
  return out;
}

const chat::ChatTemplate* RowAdmitter::chat_template() {
  if (!chat_loaded_) {
    chat_loaded_ = true;
    try {
      chat_.emplace(chat::ChatTemplate::load(job_.model, job_.chat_template));
    } catch (const Error& e) {
      chat_error_ = e.what();
    }
  }
  return chat_ ? &*chat_ : nullptr;
}

namespace {

// printf into a string: the warnings travel with their row to the writer rank, which prints them.
template <typename... Args>
std::string formatted(const char* fmt, Args... args) {
  char buf[768];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

}  // namespace

// Each replica attaches a kind of warning to its first row of that kind only; the writer rank
// prints the first to arrive, so a job warns once per kind whatever its data parallelism.
void RowAdmitter::truncate_front(Sequence& s, int64_t count, int64_t limit, const char* what) {
  if (!warned_truncate_) {
    warned_truncate_ = true;
    s.warning_kind = kWarnTruncated;
    s.warning = formatted(
        "input line %lld: the %s has %lld tokens, more than %lld: its first %lld tokens are dropped (input.truncate: "
        "left; /truncated_tokens counts them for every row; further rows are not reported)",
        static_cast<long long>(s.line + 1), what, static_cast<long long>(s.tokens.size()),
        static_cast<long long>(limit), static_cast<long long>(count));
  }
  s.tokens.erase(s.tokens.begin(), s.tokens.begin() + count);
  s.prompt_len -= count;
  s.truncated_tokens = count;
}

int64_t RowAdmitter::generation_limit(Sequence& s, int64_t max_new_tokens) {
  const int64_t context = cfg_.max_position_embeddings;
  const int64_t wanted = s.prompt_len + std::min<int64_t>(max_new_tokens, context);  // no overflow
  int64_t limit = std::min(wanted, context);
  const char* bound = "the model's context (max_position_embeddings)";
  if (kv_capacity_ > s.prompt_len && kv_capacity_ < limit) limit = kv_capacity_, bound = "the KV cache (engine.kv_cache_tokens)";
  if (limit < wanted && !warned_context_) {
    warned_context_ = true;
    s.warning_kind = kWarnLengthLimited;
    s.warning = formatted(
        "input line %lld: prompt (%lld tokens) + max_new_tokens (%lld) exceeds %s of %lld tokens: such rows stop "
        "at %lld tokens in all with finish_reason length (further rows are not reported)",
        static_cast<long long>(s.line + 1), static_cast<long long>(s.prompt_len),
        static_cast<long long>(max_new_tokens), bound, static_cast<long long>(limit), static_cast<long long>(limit));
  }
  return limit;
}

void RowAdmitter::admit(const WorkItem& item, std::vector<std::unique_ptr<Sequence>>& admitted,
                        std::vector<RowResult>& immediate) {
  const size_t before = immediate.size();
  std::unique_ptr<Sequence> first = admit_line(item, immediate);
  const std::vector<int32_t>& samples = item.samples;
  if (!first) {  // finished at once (an error row, nothing to compute): the same for every sample
    RowResult done = std::move(immediate.at(before));
    immediate.resize(before);
    for (size_t i = 0; i < samples.size(); ++i) {
      RowResult r = done;
      r.index = item.first_row + samples[i];
      r.line = item.index;
      r.sample = samples[i];
      if (i > 0) r.warning_kind = kNoWarning, r.warning.clear();
      immediate.push_back(std::move(r));
    }
    return;
  }
  // Every sample starts from the same admitted prompt; only its sampling stream differs.
  for (size_t i = 0; i < samples.size(); ++i) {
    std::unique_ptr<Sequence> s = i + 1 < samples.size() ? std::make_unique<Sequence>(*first) : std::move(first);
    s->row = item.first_row + samples[i];
    s->sample = samples[i];
    if (i > 0) s->warning_kind = kNoWarning, s->warning.clear();
    admitted.push_back(std::move(s));
  }
}

std::unique_ptr<Sequence> RowAdmitter::admit_line(const WorkItem& item, std::vector<RowResult>& immediate) {
  InputRow row;
  try {
    // Token ids must index the model's embedding (and the tokenizer's vocabulary).
    row = parse_input_row(item.line, item.index, job_, std::min<int64_t>(tok_.vocab_size(), cfg_.vocab_size));
  } catch (const BadLine& bad) {
    if (job_.input.on_bad_line == OnBadLine::kFail)
      throw Error(bad.reason + " (input.on_bad_line: fail)", kExitBadInput);
    immediate.push_back(error_row(item.index, bad.id, bad.reason));
    return nullptr;
  }
  auto s = std::make_unique<Sequence>();
  s->row = row.index;
  s->line = row.index;
  s->id = row.id;
  s->sampling = row.sampling;
  s->eos_ids = cfg_.eos_token_ids;
  s->arrived = Clock::now();
  const std::string line = "input line " + std::to_string(item.index + 1) + ": ";
  std::optional<std::string> prompt_text = row.text;
  bool add_bos = true;
  if (row.messages_json) {  // the prompt is the chat template's rendering
    const chat::ChatTemplate* t = chat_template();
    if (!t) {
      immediate.push_back(error_row(row.index, row.id, line + chat_error_));
      return nullptr;
    }
    try {
      prompt_text = t->render(nlohmann::ordered_json::parse(*row.messages_json), true,
                              merged_chat_template_kwargs(job_.chat_template_kwargs, row.chat_template_kwargs));
    } catch (const chat::RaisedException& e) {
      immediate.push_back(error_row(row.index, row.id, line + "the chat template refused the messages: " + e.what()));
      return nullptr;
    } catch (const chat::TemplateError& e) {
      immediate.push_back(error_row(row.index, row.id, line + t->origin() + ": " + e.what()));
      return nullptr;
    }
    // As Hugging Face and vLLM encode a rendered chat (add_special_tokens=False): the BOS is the
    // template's own {{ bos_token }} if it writes one, never one more from the tokenizer.
    add_bos = false;
  }
  const bool scoring = job_.task == Task::kScore;
  const bool joint =
      scoring && row.completion && !row.tokens && job_.input.score_tokenization == ScoreTokenization::kJoint;
  std::vector<int32_t> completion;
  if (row.tokens) {
    s->tokens = *row.tokens;
  } else if (joint) {
    ScoreTokens st = lm_eval_score_tokens(tok_, *prompt_text, *row.completion, add_bos);
    s->tokens = std::move(st.context);
    completion = std::move(st.continuation);
  } else {
    s->tokens = tok_.encode(*prompt_text, add_bos);
  }
  if (scoring && row.completion_tokens) completion = *row.completion_tokens;
  if (scoring && row.completion && !joint) completion = tok_.encode(*row.completion, false);
  for (const auto* ids : {&s->tokens, &completion})
    for (int32_t id : *ids)
      if (id >= cfg_.vocab_size) {  // tokenizer.json has more tokens than the model's embedding
        immediate.push_back(error_row(row.index, row.id, line + "the tokenizer produced id " + std::to_string(id) +
                                      ", outside the model's vocabulary of " + std::to_string(cfg_.vocab_size)));
        return nullptr;
      }
  s->prompt_len = static_cast<int64_t>(s->tokens.size());
  const int64_t max_pos = cfg_.max_position_embeddings;
  const bool truncate_left = job_.input.truncate == Truncate::kLeft;
  if (job_.task == Task::kEmbed) {  // prefill only: the pooled final hidden state
    s->embedding = true;
    s->pooling = job_.embed.pooling;
    s->normalize = job_.embed.normalize;
    if (s->prompt_len == 0) {
      immediate.push_back(error_row(row.index, row.id, line + "the prompt has no tokens"));
      return nullptr;
    }
    if (s->prompt_len > max_pos) {
      if (!truncate_left) {
        immediate.push_back(error_row(row.index, row.id, line + "prompt has " + std::to_string(s->prompt_len) +
                                      " tokens; the model's context is " + std::to_string(max_pos) +
                                      " (input.truncate: left keeps the last " + std::to_string(max_pos) + ")"));
        return nullptr;
      }
      truncate_front(*s, s->prompt_len - max_pos, max_pos, "prompt");
    }
    s->max_len = s->prompt_len;
    return s;
  }
  if (scoring) {
    s->scoring = true;
    if (row.completion || row.completion_tokens) {
      s->tokens.insert(s->tokens.end(), completion.begin(), completion.end());
      s->score_from = s->prompt_len;
      if (s->prompt_len == 0) {
        immediate.push_back(error_row(row.index, row.id, line + "the prompt is empty and the tokenizer adds no BOS, "
                                      "so the completion's first token has no context to be scored in"));
        return nullptr;
      }
    } else {
      s->score_from = 1;  // perplexity of the prompt itself
    }
    if (static_cast<int64_t>(s->tokens.size()) > max_pos && truncate_left) {
      // The completion is kept whole; the context loses its first tokens. At least one context
      // token must stay (the first completion token is predicted from it).
      const int64_t drop = static_cast<int64_t>(s->tokens.size()) - max_pos;
      const bool perplexity = !row.completion && !row.completion_tokens;  // scores the kept tokens 1..
      if (perplexity || s->score_from - drop >= 1) {
        truncate_front(*s, drop, max_pos, perplexity ? "prompt" : "prompt and completion");
        if (!perplexity) s->score_from -= drop;
      }
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
      s->finish_reason = FinishReason::kScored;  // nothing to score
      immediate.push_back(to_result(*s, true));
      return nullptr;
    }
    return s;
  }
  if (s->prompt_len == 0) {
    immediate.push_back(error_row(row.index, row.id, line + "the prompt has no tokens"));
    return nullptr;
  }
  if (s->prompt_len >= max_pos && truncate_left && max_pos >= 2) {
    // Keep room for max_new_tokens when the context allows it, else keep one free position.
    const int64_t keep =
        std::clamp<int64_t>(max_pos - std::max<int64_t>(row.sampling.max_new_tokens, 1), 1, max_pos - 1);
    truncate_front(*s, s->prompt_len - keep, max_pos - 1, "prompt");
  }
  if (s->prompt_len >= max_pos) {
    immediate.push_back(error_row(row.index, row.id, line + "prompt has " + std::to_string(s->prompt_len) +
                                  " tokens; the model's context is " + std::to_string(max_pos)));
    return nullptr;
  }
  s->max_len = generation_limit(*s, row.sampling.max_new_tokens);
  s->detokenizer.emplace(tok_, s->tokens);
  if (s->max_len <= s->prompt_len) {
    s->finish_reason = FinishReason::kLength;
    immediate.push_back(to_result(*s, job_.output.logprobs));
    return nullptr;
  }
  return s;
}

}  // namespace tpbatch
