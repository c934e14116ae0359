#pragma once
// A results file opened for reading (docs/results-file.md): its format version checked, its
// attributes, datasets and rows. Everything that reads a results file reads it through this class:
// export, inspect, merge, and the writer's checks of a file it resumes or rebuilds (ResultsFile,
// results_file.h, adds the writing).
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/optional_datasets.h"
#include "io/results_hdf5.h"
#include "io/row_result.h"
#include "io/run_info.h"

namespace tpbatch {

// The results file format this tpbatch writes (root attribute `format_version`). Which versions it
// reads, and what an older one lacks, is format_refusal's (results_reader.cpp).
inline constexpr int64_t kResultsFormatVersion = 3;

class ResultsReader {
 public:
  // `file` read-only; `name` is the results file as the user named it, for messages. Throws Error
  // naming it when HDF5 cannot open it. Nothing is checked yet: format_refusal, resume_refusal.
  static ResultsReader open(const std::string& file, const std::string& name);
  // A results file to read as it is (export, inspect): JobError (exit 2) naming `path` when it is
  // missing, not HDF5, or of a format this tpbatch does not read; its datasets open.
  static ResultsReader open_to_read(const std::string& path);

  ResultsReader(ResultsReader&&) = default;
  ResultsReader& operator=(ResultsReader&&) = default;
  virtual ~ResultsReader() = default;

  // The one format check: "" when this tpbatch reads the file's format_version, else why not (no
  // format_version: not a tpbatch results file; a newer version than this tpbatch knows).
  std::string format_refusal() const;
  // "" when info's job may resume this file (its format readable; the same job, input and model;
  // every dataset there with its rows), else why not. On "" the datasets are open.
  std::string resume_refusal(const RunInfo& info);

  int64_t num_rows() const { return num_rows_; }
  // Rows a file resumed with a grown input (resume_refusal accepted it) must grow to; 0 otherwise.
  int64_t rows_to_grow_to() const { return grow_to_; }
  std::vector<uint8_t> read_done() { return read_done(0, num_rows_); }
  std::vector<uint8_t> read_done(int64_t start, int64_t count);  // 0 or 1 per row
  // Rows marked done whose data does not read back (a finish_reason naming how the row ended, and
  // its token lists) are reset to 0 in `done`; a warning names how many.
  void drop_unreadable_done_rows(std::vector<uint8_t>& done);
  // Rows [start, start + count), every field stored (a dataset an older file lacks: empty).
  std::vector<RowResult> read_rows(int64_t start, int64_t count);

  // The run attributes this file holds (the optional datasets it has included), as a RunInfo; its
  // shard alone (none for a file of the whole job).
  RunInfo run_info() const;
  RunInfo shard_of_file() const;
  OptionalDatasetSpec optional_datasets() const { return optional_datasets_in(file_); }
  // A root attribute, or `absent` when the file has none.
  std::string text_attribute(const char* attr, const std::string& absent = "") const;
  int64_t int_attribute(const char* attr, int64_t absent = 0) const;
  // An attribute of /metrics (totals over runs, the last run's figures); nullopt when absent.
  std::optional<double> metric(const char* attr) const;
  std::optional<int64_t> metric_count(const char* attr) const;
  bool has_metrics() const;
  // The job's identity, root attribute `job_id`: 128 random bits as 32 hex digits, written when the
  // job's results file is created and kept by every later run that resumes it and by anything that
  // rebuilds or combines its files; `tpbatch export` builds the request ids from it, so two jobs'
  // exports never share an id. "" for a file older than job ids (a resume gives it one).
  std::string job_id() const;
  std::string commit_id() const;  // "" for a file older than commit ids
  bool writer_open() const;        // a file an older tpbatch was writing in place when it stopped
  const std::string& name() const { return name_; }
  void close();  // throws Error when HDF5 cannot write what it holds (a file open for writing)

 protected:
  explicit ResultsReader(std::string name);
  // Opens the datasets every results file has (those format 1 may lack: when there) and checks
  // each has num_rows_ rows; "" or why not.
  std::string open_datasets();

  h5::H5Handle file_;
  std::array<h5::H5Handle, h5::kNumDs> ds_;
  h5::Types types_;
  std::string name_;
  OptionalDatasets extra_;
  int64_t num_rows_ = 0;
  int64_t grow_to_ = 0;

 private:
  std::string run_refusal(const RunInfo& info);  // resume_refusal's comparison of the attributes
};

// The extra datasets a job's results file has (embedding, truncated tokens, samples).
OptionalDatasetSpec optional_spec_of(const RunInfo& info);

}  // namespace tpbatch
