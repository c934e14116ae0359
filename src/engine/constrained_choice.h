#pragma once
// The token choice of a row with a constraint (sampling.guided): the model's logits with every
// token the constraint does not allow at the row's matcher state masked, then the row's usual
// greedy pick or draw. EOS is allowed only where the output so far is a whole match. The recorded
// logprob stays the model's unmodified one (as with penalties).
#include <cstdint>

#include "engine/output_processor.h"
#include "engine/sequence.h"
#include "model/step_inputs.h"

namespace tpbatch {

// TokenChoice::token values that are no token: the row ends without one.
inline constexpr int32_t kConstraintDeadEnd = -1;   // nothing is allowed: an error row naming the position
inline constexpr int32_t kConstraintComplete = -2;  // a whole match with nothing to add and no EOS id: "stop"

// Whether s's next token is constrained: it has a constraint and is not reasoning. With a reasoning
// parser on (job key reasoning) the constraint starts once a </think> is among the row's tokens and
// no <think> block is open, as vLLM starts structured output after the reasoning ends; the reasoning
// text itself is free.
bool constraint_applies(const Sequence& s);

// 0 while some token (or EOS) can continue the row, else the marker that ends it; from the
// matcher state alone, so the host knows it before any logits.
int32_t constraint_end(const Sequence& s);

// The row's allowed tokens at its matcher state (EOS among them only at a whole match), shipped
// with the step for logits request `request`: the LM head masks each vocabulary shard with them,
// so a greedy row needs no full logits and a sampled one is drawn on the backend.
void add_constraint_mask(const Sequence& s, int64_t request, StepInputs& in);

// The row's token: the end marker; else the backend's draw or masked argmax (LogitResult's
// allowed_* fields) when it came without full logits; else masked here, after its penalties.
TokenChoice choose_constrained(const Sequence& s, const LogitResult& res, const float* full_logits, int64_t vocab);

// Ends the row for one of the markers above.
void finish_without_token(Sequence& s, int32_t marker);

// Moves the row's matcher past its newly accepted token.
void advance_constraint(Sequence& s, int32_t token);

}  // namespace tpbatch
