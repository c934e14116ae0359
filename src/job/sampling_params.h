#pragma once
// How one row is generated. Job-wide defaults from `sampling:`, overridable per JSONL line.
#include <cstdint>
#include <string>
#include <vector>

namespace tpbatch {

struct SamplingParams {
  int64_t max_new_tokens = 128;
  double temperature = 0.0;   // 0 = greedy
  int64_t top_k = 0;          // 0 = off
  double top_p = 1.0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;

  bool greedy() const { return temperature <= 0.0; }
};

}  // namespace tpbatch
