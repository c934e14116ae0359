#pragma once
// The results file (HDF5, serial, written by one rank). Layout: CONTRACT.md "Results file".
// Rows are written at their input index as they complete, in buffered batches; `/done` is written
// only once a row's data is on the disk (flushed and fsynced), so a killed job or a full disk leaves
// a file whose done rows are all readable. The writer locks the path before touching it (a second
// job on the same output fails instead of truncating the first one's file); readers need no lock.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/row_result.h"
#include "job/job_spec.h"  // IfExists

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
};

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

class ResultWriter {
 public:
  // if_exists: "overwrite" truncates; "fail" throws Error(exit 2) naming the path and leaves the
  // file untouched; "resume" reopens an existing file (its done rows are reported by done_rows()),
  // throwing Error(exit 2) if its job_yaml/model/task/num_rows or input/model fingerprints differ
  // from info's, unless absent; done rows that do not read back are reported as not done.
  // Any mode throws JobError (exit 2), before touching the file, when another job holds its lock.
  static std::unique_ptr<ResultWriter> open(const std::string& path, IfExists if_exists,
                                            const RunInfo& info);
  virtual ~ResultWriter() = default;

  virtual const std::vector<uint8_t>& done_rows() const = 0;  // size num_rows
  virtual void write(RowResult row) = 0;      // buffered
  virtual void flush() = 0;                   // writes buffered rows durably, then marks them done
  virtual void finish(const RunMetrics& metrics) = 0;  // flush, metrics, `complete`, close
};

// "" when every row is done, else which rows are not: "3 rows are missing: input lines 5, 9, 12";
// with `samples` (lines have several rows) the 0-based results rows instead.
std::string describe_missing_rows(const std::vector<uint8_t>& done, bool samples = false);

// `tpbatch inspect`: rows done/total, errors, token counts, throughput, layout. Read-only, without
// a lock: works on a running job's file (a snapshot of its last flush).
void inspect_results(const std::string& path, std::ostream& out);

}  // namespace tpbatch
