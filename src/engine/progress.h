#pragma once
// Rank 0's progress display: rows done/total, input and output tokens/s, ETA. One updating line
// on a terminal; a plain line every interval seconds otherwise (mpirun's and Slurm's pipes and
// logs). maybe_print is called whenever the engine loop passes by, not only when a row ends, so
// the lines keep coming while long rows run.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "io/result_writer.h"
#include "io/row_result.h"

namespace tpbatch {

class Progress {
 public:
  Progress(int64_t total_rows, int64_t already_done, double interval_seconds, std::FILE* out);
  void row_done(const RowResult& row, double ttft_seconds, double tpot_seconds);
  void maybe_print();
  void print_final();
  RunMetrics metrics() const;

 private:
  void print_line(bool final_line);
  void write(const std::string& text);  // stderr through common/log.h, or the stream given
  std::FILE* out_;
  bool tty_;
  double interval_;
  int64_t total_, done_, skipped_;
  int64_t errors_ = 0, prompt_tokens_ = 0, output_tokens_ = 0;
  int64_t prompt_tokens_cached_ = 0;  // of prompt_tokens_, served by the prefix cache
  // Bounded samples for the percentiles (reservoir sampling): memory stays flat however many rows.
  struct Reservoir {
    std::vector<double> values;
    uint64_t seen = 0;
    void add(double v);
  };
  Reservoir ttft_, tpot_;
  std::chrono::steady_clock::time_point start_, last_print_;
};

}  // namespace tpbatch
