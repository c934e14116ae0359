#pragma once
// One results file open for writing (HDF5): creating it, writing its rows and attributes
// (docs/results-file.md); reading it is ResultsReader's. It only writes the file it is given; which
// file that is, and when a written file replaces the results file, is the writer's durability
// protocol (result_writer.h).
#include <cstdint>
#include <string>
#include <vector>

#include "io/results_reader.h"

namespace tpbatch {

class ResultsFile : public ResultsReader {
 public:
  // A new file at `file` (truncating whatever is there) for info's job, of the current format:
  // info.num_rows rows, none done, the run's attributes. `name` is the results file as the user
  // named it, for messages.
  static ResultsFile create(const std::string& file, const std::string& name, const RunInfo& info);
  // An existing file, for writing; throws Error naming `name` when HDF5 cannot open it. Checked
  // with resume_refusal before anything is written.
  static ResultsFile open(const std::string& file, const std::string& name);

  // A file of an older format that resume_refusal accepted, made one of the current format: the
  // datasets it lacks created (their rows empty), a job_id when it has none.
  void bring_to_current_format();
  void grow(int64_t rows) { extend(rows); }
  // Writes rows (ascending indices) and marks them done; grows the file when one is past its end.
  void write_rows(const std::vector<const RowResult*>& rows);
  void write_done(const std::vector<uint8_t>& done);

  // The run's attributes: tpbatch version, model, task, job_yaml, layout, num_rows, fingerprints.
  void write_run_attrs(const RunInfo& info);
  void add_run_metrics(const RunMetrics& m);  // /metrics: totals over runs, this run's figures
  // Adds other's /metrics totals (runs, wall seconds, tokens) to this file's (none yet: copies them).
  void add_metric_totals_from(const ResultsReader& other);
  void set_commit_id(const std::string& id);
  void set_job_id(const std::string& id);
  void set_writer_open(bool open);
  void set_complete(bool complete);

 private:
  ResultsFile(std::string name, OptionalDatasetSpec extra);
  void create_dataset(int d);  // num_rows_ rows, extendible
  void write_slab(int d, int64_t start, size_t count, const void* buf);
  void extend(int64_t rows);
  void write_run_data(int64_t start, const std::vector<const RowResult*>& rows);
  h5::H5Handle metrics_group();  // /metrics, created when the file has none yet
};

// 128 random bits as 32 hex digits: job ids, commit ids.
std::string new_random_id();

}  // namespace tpbatch
