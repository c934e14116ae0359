#pragma once
// What passes between a step's stages on the leader: the scheduler's chunks of the step (which rows
// of which sequence it computed) and what the pipe brought back for them.
#include <cstdint>
#include <vector>

#include "engine/sequence.h"
#include "model/step_inputs.h"

namespace tpbatch {

// One sequence's chunk of a step.
struct StepChunk {
  Sequence* seq = nullptr;
  int64_t num_rows = 0;
  int64_t num_requests = 0;  // logits requests of this chunk, in step order
  bool samples = false;      // its (only) request picks the next token
  bool full = false;         // and asked for the full logits
  bool drawn = false;        // or the backend draws its token
};

// A step's results, in request order.
struct StepResults {
  std::vector<LogitResult> results;
  std::vector<float> full_logits;  // [rows that asked][vocab]
  std::vector<float> embeds;       // task: embed: the step's pooled hidden-state sums [embeds][hidden]
};

}  // namespace tpbatch
