#pragma once
// Result datasets that only some jobs have (docs/results-file.md):
//   /embedding         float32 [rows, hidden], task: embed; NaN for rows without an embedding
//   /truncated_tokens  int64 [rows], input.truncate: left; prompt tokens dropped from the front
//   /input_line        int64 [rows], lines with sampling.n > 1: the row's 0-based input line
//   /sample            int32 [rows], the same jobs: which of the line's samples the row is
// Chunked and extendible along rows like the other per-row datasets; the writer creates them with the
// file, reopens them on resume (refusing a file that lacks one the job needs), extends, writes and,
// when a cut-off file is rebuilt, reads them back.
#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/results_hdf5.h"
#include "io/row_result.h"

namespace tpbatch {

struct OptionalDatasetSpec {
  int64_t embedding_dim = 0;      // > 0: /embedding with this many columns
  bool truncated_tokens = false;  // /truncated_tokens
  bool samples = false;           // /input_line and /sample
  bool any() const { return embedding_dim > 0 || truncated_tokens || samples; }
};

// Which of them an existing results file has (readers: export, inspect).
OptionalDatasetSpec optional_datasets_in(hid_t file);

class OptionalDatasets {
 public:
  OptionalDatasets() = default;
  OptionalDatasets(OptionalDatasetSpec spec, std::string path) : spec_(spec), path_(std::move(path)) {}

  void create(hid_t file, int64_t rows);
  // "" when the file has what the spec asks for with `rows` rows, else why not (the writer refuses
  // to resume it); on success the datasets are open.
  std::string open(hid_t file, int64_t rows);
  void close();
  void extend(int64_t rows);
  void write(int64_t start, const std::vector<const RowResult*>& rows);
  void read(int64_t start, int64_t count, std::vector<RowResult>& rows);  // rows[i] is row start + i

 private:
  // The 1-D integer columns (kIntColumns in the .cpp), open when the spec has them.
  static constexpr int kNumIntColumns = 3;
  bool wanted(int column) const;

  OptionalDatasetSpec spec_;
  std::string path_;
  h5::H5Handle embedding_;
  h5::H5Handle columns_[kNumIntColumns];
};

}  // namespace tpbatch
