#include "engine/row_admitter.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>

#include "common/error.h"
#include "engine/reasoning_parser.h"
#include "engine/constraint_vocabulary.h"
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
  if (s.reasoning != Reasoning::kNone && !s.scoring && !s.embedding) {
    ReasoningSplit split = split_reasoning(s.reasoning, s.text);
    r.output_text = std::move(split.content);
    r.reasoning_text = std::move(split.reasoning);
  } else {
    r.output_text = s.text;
  }
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

Reasoning RowAdmitter::reasoning_parser() {
  if (!reasoning_) {
    const chat::ChatTemplate* t = job_.reasoning == Reasoning::kAuto ? chat_template() : nullptr;
    reasoning_ = resolve_reasoning(job_.reasoning, t ? std::string_view(t->source()) : std::string_view());
  }
  return *reasoning_;
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

namespace {

// A line that ends at admission with an error row: why (after "input line N: ").
struct LineRefused {
  std::string why;
};

}  // namespace

// parse -> render -> tokenize -> admit per task. A step that ends the line throws LineRefused (an
// error row) or returns the sequence finished (nothing to compute); either way the line's one
// result goes to `immediate`.
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
  try {
    const Prompt prompt = render(row);
    std::vector<int32_t> completion = tokenize(row, prompt, *s);
    if (job_.task == Task::kEmbed) admit_embed(*s);
    else if (job_.task == Task::kScore) admit_score(row, std::move(completion), *s);
    else admit_generate(row, *s);
  } catch (const LineRefused& refused) {
    immediate.push_back(error_row(row.index, row.id, "input line " + std::to_string(item.index + 1) + ": " + refused.why));
    return nullptr;
  }
  if (s->finish_reason) {
    immediate.push_back(to_result(*s, job_.output.logprobs));
    return nullptr;
  }
  return s;
}

RowAdmitter::Prompt RowAdmitter::render(const InputRow& row) {
  Prompt p{row.text, /*add_bos=*/true};
  if (!row.messages_json) return p;
  // The prompt is the chat template's rendering.
  const chat::ChatTemplate* t = chat_template();
  if (!t) throw LineRefused{chat_error_};
  try {
    p.text = t->render(nlohmann::ordered_json::parse(*row.messages_json), true,
                      merged_chat_template_kwargs(job_.chat_template_kwargs, row.chat_template_kwargs));
  } catch (const chat::RaisedException& e) {
    throw LineRefused{std::string("the chat template refused the messages: ") + e.what()};
  } catch (const chat::TemplateError& e) {
    throw LineRefused{t->origin() + ": " + e.what()};
  }
  // As Hugging Face and vLLM encode a rendered chat (add_special_tokens=False): the BOS is the
  // template's own {{ bos_token }} if it writes one, never one more from the tokenizer.
  p.add_bos = false;
  return p;
}

std::vector<int32_t> RowAdmitter::tokenize(const InputRow& row, const Prompt& prompt, Sequence& s) {
  const bool scoring = job_.task == Task::kScore;
  const bool joint =
      scoring && row.completion && !row.tokens && job_.input.score_tokenization == ScoreTokenization::kJoint;
  std::vector<int32_t> completion;
  if (row.tokens) {
    s.tokens = *row.tokens;
  } else if (joint) {
    ScoreTokens st = lm_eval_score_tokens(tok_, *prompt.text, *row.completion, prompt.add_bos);
    s.tokens = std::move(st.context);
    completion = std::move(st.continuation);
  } else {
    s.tokens = tok_.encode(*prompt.text, prompt.add_bos);
  }
  if (scoring && row.completion_tokens) completion = *row.completion_tokens;
  if (scoring && row.completion && !joint) completion = tok_.encode(*row.completion, false);
  for (const auto* ids : {&s.tokens, &completion})
    for (int32_t id : *ids)
      if (id >= cfg_.vocab_size)  // tokenizer.json has more tokens than the model's embedding
        throw LineRefused{"the tokenizer produced id " + std::to_string(id) + ", outside the model's vocabulary of " +
                          std::to_string(cfg_.vocab_size)};
  s.prompt_len = static_cast<int64_t>(s.tokens.size());
  return completion;
}

// Prefill only: the pooled final hidden state.
void RowAdmitter::admit_embed(Sequence& s) {
  const int64_t max_pos = cfg_.max_position_embeddings;
  s.embedding = true;
  s.pooling = job_.embed.pooling;
  s.normalize = job_.embed.normalize;
  if (s.prompt_len == 0) throw LineRefused{"the prompt has no tokens"};
  if (s.prompt_len > max_pos) {
    if (job_.input.truncate != Truncate::kLeft)
      throw LineRefused{"prompt has " + std::to_string(s.prompt_len) + " tokens; the model's context is " +
                        std::to_string(max_pos) + " (input.truncate: left keeps the last " + std::to_string(max_pos) +
                        ")"};
    truncate_front(s, s.prompt_len - max_pos, max_pos, "prompt");
  }
  s.max_len = s.prompt_len;
}

void RowAdmitter::admit_score(const InputRow& row, std::vector<int32_t> completion, Sequence& s) {
  const int64_t max_pos = cfg_.max_position_embeddings;
  const bool perplexity = !row.completion && !row.completion_tokens;  // scores the prompt's own tokens 1..
  s.scoring = true;
  if (perplexity) {
    s.score_from = 1;
  } else {
    s.tokens.insert(s.tokens.end(), completion.begin(), completion.end());
    s.score_from = s.prompt_len;
    if (s.prompt_len == 0)
      throw LineRefused{"the prompt is empty and the tokenizer adds no BOS, so the completion's first token has no "
                        "context to be scored in"};
  }
  if (static_cast<int64_t>(s.tokens.size()) > max_pos && job_.input.truncate == Truncate::kLeft) {
    // The completion is kept whole; the context loses its first tokens. At least one context
    // token must stay (the first completion token is predicted from it).
    const int64_t drop = static_cast<int64_t>(s.tokens.size()) - max_pos;
    if (perplexity || s.score_from - drop >= 1) {
      truncate_front(s, drop, max_pos, perplexity ? "prompt" : "prompt and completion");
      if (!perplexity) s.score_from -= drop;
    }
  }
  if (static_cast<int64_t>(s.tokens.size()) > max_pos)
    throw LineRefused{"prompt and completion have " + std::to_string(s.tokens.size()) +
                      " tokens; the model's context is " + std::to_string(max_pos)};
  if (s.tokens.empty()) throw LineRefused{"the prompt has no tokens"};
  if (s.score_from >= static_cast<int64_t>(s.tokens.size())) s.finish_reason = FinishReason::kScored;  // nothing to score
}

void RowAdmitter::admit_generate(const InputRow& row, Sequence& s) {
  const int64_t max_pos = cfg_.max_position_embeddings;
  if (s.prompt_len == 0) throw LineRefused{"the prompt has no tokens"};
  if (s.prompt_len >= max_pos && job_.input.truncate == Truncate::kLeft && max_pos >= 2) {
    // Keep room for max_new_tokens when the context allows it, else keep one free position.
    const int64_t keep =
        std::clamp<int64_t>(max_pos - std::max<int64_t>(row.sampling.max_new_tokens, 1), 1, max_pos - 1);
    truncate_front(s, s.prompt_len - keep, max_pos - 1, "prompt");
  }
  if (s.prompt_len >= max_pos)
    throw LineRefused{"prompt has " + std::to_string(s.prompt_len) + " tokens; the model's context is " +
                      std::to_string(max_pos)};
  s.max_len = generation_limit(s, row.sampling.max_new_tokens);
  s.detokenizer.emplace(tok_, s.tokens);
  s.reasoning = reasoning_parser();
  start_think_tracking(s);
  if (row.sampling.guided.any()) {  // compiled here, while the row waits in the lookahead
    if (!constraints_) constraints_ = std::make_unique<guided::ConstraintCache>(constraint_vocabulary(tok_));
    try {
      s.constraint = constraints_->get(row.sampling.guided);
    } catch (const guided::GuidedError& e) {
      throw LineRefused{e.what()};
    }
    s.constraint_state = s.constraint->start();
  }
  if (s.max_len <= s.prompt_len) s.finish_reason = FinishReason::kLength;
}

void RowAdmitter::start_think_tracking(Sequence& s) {
  const bool budget = s.sampling.max_reasoning_tokens != kNoReasoningBudget;
  if (!budget && s.reasoning == Reasoning::kNone) return;
  if (!think_) think_ = think_tokens_of(tok_, cfg_.vocab_size);
  if (*think_) {
    start_think_block(s, **think_);
  } else if (budget) {
    throw LineRefused{"max_reasoning_tokens needs '" + std::string(kThinkOpen) + "' and '" + std::string(kThinkClose) +
                      "' to be single tokens of the model's tokenizer, and this one has no such tokens"};
  }
}

}  // namespace tpbatch
