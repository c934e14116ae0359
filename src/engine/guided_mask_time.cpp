#include "engine/guided_mask_time.h"

#include <cstdio>

namespace tpbatch {

GuidedMaskTime& guided_mask_time() {
  static GuidedMaskTime t;
  return t;
}

MaskTimer::~MaskTimer() {
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
  GuidedMaskTime& t = guided_mask_time();
  t.nanoseconds.fetch_add(ns.count(), std::memory_order_relaxed);
  if (choice_) t.choices.fetch_add(1, std::memory_order_relaxed);
}

std::string guided_mask_time_line() {
  const GuidedMaskTime& t = guided_mask_time();
  const int64_t choices = t.choices.load(), steps = t.steps.load();
  if (choices == 0 || steps == 0) return "";
  const double ms = t.nanoseconds.load() * 1e-6;
  char line[256];
  std::snprintf(line, sizeof line,
                "[tpbatch] guided: %lld constrained token choices in %lld steps; mask time %.3f ms per step, "
                "%.1f us per choice (%.1f ms in all, summed over threads)\n",
                static_cast<long long>(choices), static_cast<long long>(steps), ms / steps, ms * 1e3 / choices, ms);
  return line;
}

}  // namespace tpbatch
