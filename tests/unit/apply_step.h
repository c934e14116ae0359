#pragma once
// The leader's step as the replica loop takes it back, for tests that drive a Scheduler by hand:
// complete_step -> OutputProcessor::process -> update.
#include <cstdint>
#include <vector>

#include "engine/output_processor.h"
#include "engine/scheduler.h"

namespace tpbatch {

inline void apply_step(Scheduler& sched, std::vector<LogitResult> results, std::vector<float> full_logits,
                       int64_t vocab, std::vector<float> embeds = {}, int64_t hidden = 0) {
  const std::vector<StepChunk> step = sched.complete_step();
  OutputProcessor().process(step, StepResults{std::move(results), std::move(full_logits), std::move(embeds)}, vocab,
                            hidden);
  sched.update(step);
}

}  // namespace tpbatch
