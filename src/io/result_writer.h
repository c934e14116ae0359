#pragma once
// The results file (HDF5, serial, written by one rank). Layout: CONTRACT.md "Results file".
// Rows are written at their input index as they complete, in buffered batches; `/done` is written
// after a row's data, and the file is flushed regularly, so a killed job leaves a readable file.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/row_result.h"

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
};

struct RunMetrics {           // /metrics attributes
  double wall_seconds = 0;
  int64_t prompt_tokens = 0;
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
  // throwing Error(exit 2) if its job_yaml/model/task/num_rows differ from info's, unless absent.
  static std::unique_ptr<ResultWriter> open(const std::string& path, const std::string& if_exists,
                                            const RunInfo& info);
  virtual ~ResultWriter() = default;

  virtual const std::vector<uint8_t>& done_rows() const = 0;  // size num_rows
  virtual void write(RowResult row) = 0;      // buffered
  virtual void flush() = 0;                   // writes buffered rows, then H5Fflush
  virtual void finish(const RunMetrics& metrics) = 0;  // flush, metrics, `complete`, close
};

// `tpbatch inspect`: rows done/total, errors, token counts, throughput, layout.
void inspect_results(const std::string& path, std::ostream& out);

}  // namespace tpbatch
