#include "engine/constrained_choice.h"

#include <limits>
#include <vector>

#include "engine/guided_mask_time.h"
#include "engine/reasoning_budget.h"
#include "engine/sampler.h"

namespace tpbatch {

bool constraint_applies(const Sequence& s) {
  if (!s.constraint) return false;
  if (s.think.close_id < 0) return true;  // no think tokens tracked: nothing to wait for
  if (s.reasoning != Reasoning::kNone && !s.think.ended) return false;
  return !inside_reasoning(s);
}

namespace {

// EOS ends a constrained row only at a whole match, once the row may end.
bool eos_allowed(const Sequence& s) {
  const SamplingParams& p = s.sampling;
  const bool may_end = s.num_generated() >= p.min_tokens && !p.ignore_eos;
  return s.constraint->complete(s.constraint_state) && may_end && !s.eos_ids.empty();
}

}  // namespace

int32_t constraint_end(const Sequence& s) {
  guided::Constraint& c = *s.constraint;
  if (!c.allowed(s.constraint_state).empty() || eos_allowed(s)) return 0;
  return c.complete(s.constraint_state) && s.eos_ids.empty() ? kConstraintComplete : kConstraintDeadEnd;
}

void add_constraint_mask(const Sequence& s, int64_t request, StepInputs& in) {
  const MaskTimer timer(false);
  TokenMaskWriter mask = in.mask_writer();
  mask.begin(request);
  mask.allow_all(s.constraint->allowed_bits(s.constraint_state));
  if (eos_allowed(s))
    for (int32_t id : s.eos_ids) mask.allow(id);
}

TokenChoice choose_constrained(const Sequence& s, const LogitResult& res, const float* full, int64_t vocab) {
  if (const int32_t end = constraint_end(s)) return TokenChoice{end, 0, {}};
  if (res.token >= 0) return TokenChoice{res.token, res.token_logit, {}};  // drawn on the backend from the masked logits
  if (!full) {  // greedy, masked on the vocabulary shards (add_constraint_mask)
    if (res.allowed_argmax < 0) return TokenChoice{kConstraintDeadEnd, 0, {}};  // allowed ids all past the model's vocabulary
    return TokenChoice{res.allowed_argmax, res.allowed_max_logit, {}};
  }
  // The host path, for rows that need their full logits anyway (penalties, top_logprobs, sampling
  // without a backend draw).
  const SamplingParams& p = s.sampling;
  const float* source = full;
  thread_local std::vector<float> penalized;  // the row's logits after its penalties
  if (p.penalized()) {
    penalized.assign(full, full + vocab);
    apply_penalties(penalized.data(), vocab, p, s.tokens, s.prompt_len);
    source = penalized.data();
  }
  thread_local std::vector<float> masked;  // only the allowed tokens keep a logit
  masked.assign(static_cast<size_t>(vocab), -std::numeric_limits<float>::infinity());
  for (int32_t id : s.constraint->allowed(s.constraint_state))
    if (id < vocab) masked[id] = source[id];
  if (eos_allowed(s))
    for (int32_t id : s.eos_ids)
      if (id >= 0 && id < vocab) masked[id] = source[id];

  TokenChoice choice;
  choice.token = sample_token(masked.data(), vocab, p, static_cast<uint64_t>(s.line),
                              static_cast<uint64_t>(s.num_generated()), static_cast<uint64_t>(s.sample));
  choice.logit = full[choice.token];
  if (p.top_logprobs > 0) choice.alternatives = top_logprobs(full, vocab, p.top_logprobs, res.log_z);
  return choice;
}

void finish_without_token(Sequence& s, int32_t marker) {
  if (marker == kConstraintComplete) {
    finish_sequence(s, FinishReason::kStop);
    return;
  }
  s.error = "guided decoding: no token can continue the constrained output at generated position " +
            std::to_string(s.num_generated()) + " (the constraint dead-ends with this vocabulary" +
            (s.sampling.ignore_eos || s.num_generated() < s.sampling.min_tokens ? ", EOS being held back)" : ")");
  finish_sequence(s, FinishReason::kError);
}

void advance_constraint(Sequence& s, int32_t token) {
  s.constraint_state = s.constraint->advance(s.constraint_state, token);
  if (s.constraint_state == guided::ByteDfa::kDead) {  // choose_constrained allows no such token
    s.error = "internal error: guided decoding accepted a token its constraint does not allow";
    finish_sequence(s, FinishReason::kError);
  }
}

}  // namespace tpbatch
