#pragma once
// What the results file records about the job and its runs: the root attributes (RunInfo) and one
// run's figures for /metrics (RunMetrics). docs/results-file.md.
#include <cstdint>
#include <string>

#include "job/shard.h"

namespace tpbatch {

struct RunInfo {              // root attributes
  std::string model;
  std::string task;
  std::string job_yaml;
  int64_t world_size = 1;
  int64_t tensor_parallel = 1;
  int64_t pipeline_parallel = 1;
  int64_t data_parallel = 1;
  int64_t num_rows = 0;
  std::string input_fingerprint;   // size and hash of the input file: resume refuses a changed input
  std::string model_fingerprint;   // model_fingerprint.h: resume refuses a changed model folder
  int64_t embedding_dim = 0;       // task: embed: /embedding's width (the hidden size); 0 = no /embedding
  bool truncated_tokens = false;   // input.truncate: left: a /truncated_tokens dataset
  bool samples = false;            // some line has sampling.n > 1: /input_line and /sample datasets
  std::string input_path{};        // resume accepts an input that grew by appended lines (input_grew_from);
                                   // root attribute `input_path` (absolute): where export finds the input
  std::string chat_template_fingerprint{};  // the job's chat_template file, if any: resume refuses an edited one
  std::string job_id{};            // for a new file: its job_id (results_reader.h); "" = a fresh random one
  // A shard's file (input.shard) has every row of the job, at its index, but computes only the
  // rows of its lines: attributes shard_index, shard_count, shard_first_line, shard_end_line,
  // shard_first_row, shard_end_row (ranges [first, end), 0-based). Resume refuses another shard.
  Shard shard{};
  IndexRange shard_lines{};
  IndexRange shard_rows{};
  // The rows this file is to hold: the shard's, or all num_rows.
  IndexRange rows_wanted() const { return shard.sharded() ? shard_rows : IndexRange{0, num_rows}; }
};

// "shard 3 of 16 (input lines 301 to 400)", or "the whole job (no shard)", for messages (results_reader.cpp).
std::string describe_shard(const RunInfo& info);

struct RunMetrics {           // this run's figures; /metrics holds totals over all runs of the file
  double wall_seconds = 0;
  int64_t prompt_tokens = 0;
  int64_t prompt_tokens_cached = 0;  // of prompt_tokens, served by the prefix cache (not computed)
  int64_t output_tokens = 0;
  double output_tokens_per_second = 0;
  double total_tokens_per_second = 0;
  double ttft_p50 = 0, ttft_p90 = 0, ttft_p99 = 0;   // seconds, time to first token
  double tpot_p50 = 0, tpot_p90 = 0, tpot_p99 = 0;   // seconds, time per output token
};

}  // namespace tpbatch
