#pragma once
// The finished result of one input row: what the writer stores in the HDF5 file.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "io/finish_reason.h"

namespace tpbatch {

struct RowResult {
  int64_t index = 0;             // results row (the input line, unless lines have sampling.n > 1)
  int64_t line = 0;              // input line (/input_line when lines have several rows)
  int32_t sample = 0;            // which of the line's samples (/sample)
  std::string id;
  std::vector<int32_t> prompt_tokens;
  std::vector<int32_t> output_tokens;
  std::string output_text;
  std::string reasoning_text;    // job key reasoning: the text of the <think> block (/reasoning_text)
  std::vector<float> output_logprobs;
  // sampling.top_logprobs = k: the k best tokens and their logprobs at each generated position,
  // position after position ([output tokens][k], flattened; empty when k = 0).
  std::vector<int32_t> top_logprob_tokens;
  std::vector<float> top_logprobs;
  double logprob_sum = 0.0;
  uint8_t is_greedy = 0;
  std::optional<FinishReason> finish_reason;  // none: a row not finished (read back from a file)
  std::string error;
  std::vector<float> embedding;  // task: embed: /embedding's row (hidden_size values); empty otherwise
  int64_t truncated_tokens = 0;  // input.truncate: left: prompt tokens dropped (/truncated_tokens)
  // Not stored per row: they feed the /metrics percentiles on the writer rank.
  double ttft_seconds = 0.0;   // time to first token
  double tpot_seconds = 0.0;   // mean time per output token after the first
  int64_t prompt_tokens_cached = 0;  // prompt tokens served by the prefix cache (/metrics)
  // A warning this row raised (its kind: RowWarning), printed by the writer rank once per job and kind.
  uint8_t warning_kind = 0;
  std::string warning;
};

// The warnings a row may raise, each printed once per job (not once per replica).
enum RowWarning : uint8_t { kNoWarning = 0, kWarnTruncated = 1, kWarnLengthLimited = 2, kNumRowWarnings = 3 };

// A compact binary form for sending results between ranks (MPI).
std::string serialize(const RowResult& row);
RowResult deserialize_row_result(std::string_view bytes);  // throws Error on malformed bytes

}  // namespace tpbatch
