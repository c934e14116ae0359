#pragma once
// One open results file (HDF5): its datasets, attributes and rows (docs/results-file.md). It
// only reads and writes the file it is given; which file that is, and when a written file replaces
// the results file, is the writer's durability protocol (result_writer.h).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "io/optional_datasets.h"
#include "io/results_hdf5.h"
#include "io/row_result.h"
#include "io/run_info.h"

namespace tpbatch {

class ResultsFile {
 public:
  // A new file at `file` (truncating whatever is there) for info's job: info.num_rows rows, none
  // done, the run's attributes. `name` is the results file as the user named it, for messages.
  static ResultsFile create(const std::string& file, const std::string& name, const RunInfo& info);
  // An existing file; throws Error naming `name` when HDF5 cannot open it.
  static ResultsFile open(const std::string& file, const std::string& name, bool writable);

  ResultsFile(ResultsFile&&) = default;
  ResultsFile& operator=(ResultsFile&&) = default;
  ~ResultsFile() = default;

  // "" when info's job may resume this file (the same job, input and model; every dataset there
  // with its rows), else why not. On "" the datasets are open (when writable, datasets added to the
  // format later are created, their rows empty).
  std::string resume_refusal(const RunInfo& info);

  int64_t num_rows() const { return num_rows_; }
  // Rows a file resumed with a grown input (resume_refusal accepted it) must grow to; 0 otherwise.
  int64_t rows_to_grow_to() const { return grow_to_; }
  void grow(int64_t rows) { extend(rows); }
  std::vector<uint8_t> read_done();
  // Rows marked done whose data does not read back (a finish_reason naming how the row ended, and
  // its token lists) are reset to 0 in `done`; a warning names how many.
  void drop_unreadable_done_rows(std::vector<uint8_t>& done);
  // Rows [start, start + count), every field stored.
  std::vector<RowResult> read_rows(int64_t start, int64_t count);
  // Writes rows (ascending indices) and marks them done; grows the file when one is past its end.
  void write_rows(const std::vector<const RowResult*>& rows);
  void write_done(const std::vector<uint8_t>& done);

  // The run's attributes: version, model, task, job_yaml, layout, num_rows, fingerprints.
  void write_run_attrs(const RunInfo& info);
  // The run attributes this file holds (the optional datasets it has included), as a RunInfo; its
  // shard alone (none for a file of the whole job).
  RunInfo run_info() const;
  RunInfo shard_of_file() const;
  void add_run_metrics(const RunMetrics& m);          // /metrics: totals over runs, this run's figures
  // Adds other's /metrics totals (runs, wall seconds, tokens) to this file's (none yet: copies them).
  void add_metric_totals_from(ResultsFile& other);
  std::string commit_id() const;                       // "" for a file older than commit ids
  void set_commit_id(const std::string& id);
  std::string job_id() const;                          // read_job_id
  void set_job_id(const std::string& id);
  bool writer_open() const;  // a file an older tpbatch was writing in place when it stopped
  void set_writer_open(bool open);
  void set_complete(bool complete);
  void close();  // throws Error when HDF5 cannot write what it holds

 private:
  ResultsFile(std::string name, OptionalDatasetSpec extra);
  void create_dataset(int d, hid_t space, hid_t dcpl);
  void write_slab(int d, int64_t start, size_t count, const void* buf);
  void extend(int64_t rows);
  void write_run_data(int64_t start, const std::vector<const RowResult*>& rows);
  h5::H5Handle metrics_group();  // /metrics, created when the file has none yet

  h5::H5Handle file_;
  std::array<h5::H5Handle, h5::kNumDs> ds_;
  h5::Types types_;
  std::string name_;
  OptionalDatasets extra_;
  int64_t num_rows_ = 0;
  int64_t grow_to_ = 0;
  bool writable_ = false;
};

// The job's identity, root attribute `job_id`: 128 random bits as 32 hex digits, written when the
// job's results file is created (create(): RunInfo::job_id, or a fresh one) and kept by every later
// run that resumes it and by anything that rebuilds or combines its files; `tpbatch export` builds
// the request ids from it, so two jobs' exports never share an id. "" for a file older than job ids
// (a resume gives it one).
std::string read_job_id(hid_t file, const std::string& name);

// 128 random bits as 32 hex digits: job ids, commit ids.
std::string new_random_id();

// The extra datasets a job's results file has (embedding, truncated tokens, samples).
OptionalDatasetSpec optional_spec_of(const RunInfo& info);

}  // namespace tpbatch
