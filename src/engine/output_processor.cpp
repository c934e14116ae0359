#include "engine/output_processor.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "common/error.h"
#include "engine/constrained_choice.h"
#include "engine/embedding_pooling.h"
#include "engine/guided_mask_time.h"
#include "engine/reasoning_budget.h"
#include "engine/sampler.h"

namespace tpbatch {
namespace {

bool contains(const std::vector<int32_t>& ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

// EOS and stop_token_ids stay out of reach until min_tokens have been generated.
bool masks_ends(const Sequence& s) { return s.num_generated() < s.sampling.min_tokens; }

}  // namespace

bool needs_full_logits(const Sequence& s) {
  const SamplingParams& p = s.sampling;
  // A forced </think> needs its own logit for the logprob recorded. A constraint alone does not:
  // its mask goes with the step to the vocabulary shards (add_constraint_mask).
  return !p.greedy() || p.penalized() || p.top_logprobs > 0 || masks_ends(s) || forces_end_of_reasoning(s);
}

bool draws_on_backend(const Sequence& s) {
  const SamplingParams& p = s.sampling;
  // A constrained row is drawn from its masked logits, unless nothing can continue it.
  return !p.greedy() && !p.penalized() && p.top_logprobs == 0 && !masks_ends(s) && !forces_end_of_reasoning(s) &&
         !(constraint_applies(s) && constraint_end(s) != 0);
}

// The draw's key is the one choose() uses on the host: (line, generated tokens, sample).
DrawParams draw_params(const Sequence& s) {
  const SamplingParams& p = s.sampling;
  return DrawParams{p.temperature, p.top_k, p.top_p, p.min_p, p.seed, static_cast<uint64_t>(s.line),
                    static_cast<uint64_t>(s.num_generated()), static_cast<uint64_t>(s.sample)};
}

int32_t draw_on_host(const float* logits, int64_t vocab, const DrawParams& d, float row_max) {
  SamplingParams p;
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.seed = d.seed;
  return sample_token(logits, vocab, p, d.row, d.step, d.sample,
                      std::isnan(row_max) ? std::nullopt : std::optional<float>(row_max));
}

void finish_sequence(Sequence& seq, FinishReason reason) {
  seq.finish_reason = reason;
  seq.finished = std::chrono::steady_clock::now();
  if (seq.detokenizer && seq.text.empty() && seq.finish_reason != FinishReason::kStop) seq.text = seq.detokenizer->flush_text();
}

namespace {

// Appends a generated token and its logprob; finishes the sequence on a stop token, EOS, a stop
// string or its length.
void append_token(Sequence& s, int32_t token, float logprob) {
  if (s.num_generated() == 0) s.first_token = std::chrono::steady_clock::now();
  const bool may_end = !masks_ends(s);  // counted before this token
  s.tokens.push_back(token);
  s.logprobs.push_back(logprob);
  track_reasoning(s, token);
  const size_t before = s.detokenizer ? s.detokenizer->text().size() : 0;
  if (may_end && contains(s.sampling.stop_token_ids, token)) {
    // The stop token stays in /output_tokens; its text is not part of /output_text.
    if (s.detokenizer) s.text = s.detokenizer->flush_text();
    finish_sequence(s, FinishReason::kStop);
    return;
  }
  if (s.detokenizer) s.detokenizer->push(token);
  if (may_end && !s.sampling.ignore_eos && contains(s.eos_ids, token)) {
    finish_sequence(s, FinishReason::kEos);
    return;
  }
  if (s.detokenizer && !s.sampling.stop.empty()) {
    const std::string& text = s.detokenizer->text();
    size_t best = std::string::npos;
    for (const std::string& stop : s.sampling.stop) {
      const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
      const size_t at = text.find(stop, from);
      if (at != std::string::npos) best = std::min(best, at);
    }
    if (best != std::string::npos) {
      s.text = text.substr(0, best);
      finish_sequence(s, FinishReason::kStop);
      return;
    }
  }
  if (static_cast<int64_t>(s.tokens.size()) >= s.max_len) finish_sequence(s, FinishReason::kLength);
}

}  // namespace

void OutputProcessor::score(Sequence& s, std::span<const LogitResult> results) {
  for (const LogitResult& res : results) {
    const int32_t target = s.tokens[s.score_from + static_cast<int64_t>(s.logprobs.size())];
    s.logprobs.push_back(res.target_logit - res.log_z);
    if (res.argmax != target) s.all_greedy = false;
  }
  if (s.num_computed == static_cast<int64_t>(s.tokens.size())) finish_sequence(s, FinishReason::kScored);
}

void OutputProcessor::generate(Sequence& s, const LogitResult& res, const float* full, int64_t vocab) {
  accept(s, res, choose(s, res, full, vocab));
}

TokenChoice OutputProcessor::choose(const Sequence& s, const LogitResult& res, const float* full, int64_t vocab) {
  const SamplingParams& p = s.sampling;
  TokenChoice c{res.argmax, res.max_logit, {}};
  if (forces_end_of_reasoning(s)) {  // the thinking budget is spent: </think>, whatever the logits say
    if (!full) throw Error("internal error: a row whose thinking budget is spent came without its logits");
    c.token = s.think.close_id;
    c.logit = full[c.token];
    if (p.top_logprobs > 0) c.alternatives = top_logprobs(full, vocab, p.top_logprobs, res.log_z);
    return c;
  }
  if (constraint_applies(s)) {
    const MaskTimer timer(true);
    return choose_constrained(s, res, full, vocab);
  }
  if (res.token >= 0) return TokenChoice{res.token, res.token_logit, {}};  // drawn on the backend
  if (!full) return c;
  // Penalties and masks change what is picked; the recorded logprobs stay those of the model's
  // unmodified distribution (docs/results-file.md: /output_logprobs).
  const float* pick_from = full;
  std::optional<float> row_max = res.max_logit;  // the LM head's maximum of these logits
  if (p.penalized() || masks_ends(s)) {
    thread_local std::vector<float> processed;  // one row's logits after penalties and masks
    processed.assign(full, full + vocab);
    apply_penalties(processed.data(), vocab, p, s.tokens, s.prompt_len);
    if (masks_ends(s)) {
      if (!p.ignore_eos) mask_tokens(processed.data(), vocab, s.eos_ids);
      mask_tokens(processed.data(), vocab, p.stop_token_ids);
    }
    pick_from = processed.data();
    row_max.reset();
  }
  c.token = sample_token(pick_from, vocab, p, static_cast<uint64_t>(s.line), static_cast<uint64_t>(s.num_generated()),
                         static_cast<uint64_t>(s.sample), row_max);
  c.logit = full[c.token];
  if (p.top_logprobs > 0) c.alternatives = top_logprobs(full, vocab, p.top_logprobs, res.log_z);
  return c;
}

void OutputProcessor::accept(Sequence& s, const LogitResult& res, const TokenChoice& c) {
  const bool constrained = constraint_applies(s);  // before the token: a </think> is not the answer's
  if (constrained && c.token < 0) {
    finish_without_token(s, c.token);
    return;
  }
  if (c.token != res.argmax) s.all_greedy = false;
  for (const auto& [id, lp] : c.alternatives) {
    s.top_ids.push_back(id);
    s.top_logprobs.push_back(lp);
  }
  append_token(s, c.token, c.logit - res.log_z);
  if (constrained && !s.finish_reason) {
    const MaskTimer timer(false);
    advance_constraint(s, c.token);
  }
}

void OutputProcessor::process(const std::vector<StepChunk>& step, const StepResults& out, int64_t vocab,
                              int64_t hidden) {
  const std::vector<LogitResult>& results = out.results;
  struct Generating {
    const Sequence* seq;
    const LogitResult* result;
    const float* logits;  // null: the argmax is enough
  };
  std::vector<Generating> generating;
  size_t r = 0, f = 0;
  for (const StepChunk& e : step) {
    if (e.seq->embedding) continue;
    if (e.seq->scoring) {
      r += static_cast<size_t>(e.num_requests);
    } else if (e.samples) {
      // (A masked row whose allowed tokens all lie past the model's vocabulary has nothing to draw.)
      if (e.drawn && results.at(r).token < 0 && results.at(r).allowed_argmax >= 0)
        throw Error("internal error: a drawn row's token did not come back");
      generating.push_back({e.seq, &results.at(r++), e.full ? out.full_logits.data() + (f++) * vocab : nullptr});
    }
  }
  std::vector<TokenChoice> choices(generating.size());
  const int64_t n_gen = static_cast<int64_t>(generating.size());
  const int64_t constrained_before = guided_mask_time().choices.load(std::memory_order_relaxed);
#pragma omp parallel for schedule(dynamic, 1) if (n_gen > 1)
  for (int64_t i = 0; i < n_gen; ++i)
    choices[i] = choose(*generating[i].seq, *generating[i].result, generating[i].logits, vocab);
  if (guided_mask_time().choices.load(std::memory_order_relaxed) != constrained_before)
    guided_mask_time().steps.fetch_add(1, std::memory_order_relaxed);

  r = 0;
  size_t g = 0;  // choices used
  size_t k = 0;  // embeds rows used
  for (const StepChunk& e : step) {
    Sequence& s = *e.seq;
    if (s.embedding) {
      if (e.num_requests > 0) {
        if ((k + 1) * static_cast<size_t>(hidden) > out.embeds.size())
          throw Error("internal error: a step's embeddings did not come back");
        const int64_t p0 = s.num_computed - e.num_rows;
        s.embedding_sum.add(out.embeds.data() + k * static_cast<size_t>(hidden), hidden,
                            pooled_rows(s.pooling, p0, e.num_rows, s.prompt_len)->count);
        ++k;
      }
      if (s.num_computed == s.prompt_len) {
        s.embedding_out = s.embedding_sum.finish(s.pooling, s.normalize);
        finish_sequence(s, FinishReason::kEmbedded);
      }
    } else if (s.scoring) {
      score(s, std::span<const LogitResult>(results.data() + r, static_cast<size_t>(e.num_requests)));
      r += static_cast<size_t>(e.num_requests);
    } else if (e.samples) {
      accept(s, results[r++], choices[g++]);
    }
  }
}

}  // namespace tpbatch
