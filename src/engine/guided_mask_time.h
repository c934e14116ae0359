#pragma once
// What constrained rows cost the token choice: the time spent masking their logits (the allowed
// tokens of the row's state written into the step's mask, the pick or the host's masked copy) and
// advancing their matchers, summed over the step's rows (chosen on parallel threads, so this is thread time, not wall time), and the
// steps that had such a row. Printed after the run's closing line (docs/guided.md).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace tpbatch {

struct GuidedMaskTime {
  std::atomic<int64_t> nanoseconds{0};
  std::atomic<int64_t> choices{0};  // constrained token choices
  std::atomic<int64_t> steps{0};    // steps with at least one
};

// This process's counters.
GuidedMaskTime& guided_mask_time();

// Adds the time from construction to destruction; counts a choice when asked to.
class MaskTimer {
 public:
  explicit MaskTimer(bool counts_a_choice) : choice_(counts_a_choice), start_(std::chrono::steady_clock::now()) {}
  ~MaskTimer();
  MaskTimer(const MaskTimer&) = delete;
  MaskTimer& operator=(const MaskTimer&) = delete;

 private:
  bool choice_;
  std::chrono::steady_clock::time_point start_;
};

// "[tpbatch] guided: ..." with the mask time per step and per choice; "" when no row was constrained.
std::string guided_mask_time_line();

}  // namespace tpbatch
