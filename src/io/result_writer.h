#pragma once
// The results file (HDF5, serial, written by one rank). Layout: docs/results-file.md.
//
// Crash consistency: the file at the output path is only ever replaced whole, by renaming a file
// that was closed and synced (file_commit.h), so a kill or a power loss at any instant leaves either
// the previous file or the next one, each consistent. A run builds its next file beside it
// (`.partial`: a copy of the results file, or a fresh one) and records every finished row in the
// row journal (`.journal`, row_journal.h), synced before the row counts as done. finish() closes the
// partial file and renames it over the results file, then deletes the journal. A run that stops
// before that leaves the last committed file and a journal extending it: resume copies the file,
// replays the journal's rows into the copy and goes on. HDF5 itself is never trusted to survive a
// crash mid-write; it never has to.
//
// Chosen over a checksummed row journal alone (the HDF5 file built only at the end, which a
// SIGTERM's 30 s could not always afford) and over committing a fresh copy at every flush (a full
// copy each time): rows are written into HDF5 as they come, and durability costs one append and
// one sync per flush. What it costs instead: while a run is going, the file at the output path holds
// the rows of the previous commit; `tpbatch inspect` adds the journal's rows.
//
// The writer locks the output (output_lock.h) before touching it: a second job on the same output
// fails instead of replacing the first one's file; readers need no lock.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/row_result.h"
#include "io/run_info.h"
#include "job/job_spec.h"  // IfExists, OutputSpec

namespace tpbatch {

// When the writer records its buffered rows durably (flush): once `rows` rows are buffered, or at
// the first row written `seconds` or more after the last flush. A crash loses at most those.
struct FlushPolicy {
  int64_t rows = OutputSpec{}.flush_rows;  // output.flush_rows
  double seconds = 1.0;
};

class ResultWriter {
 public:
  // if_exists: "overwrite" starts a new file (the old one stays until the new one replaces it);
  // "fail" throws Error(exit 2) naming the path and leaves the file untouched; "resume" continues an
  // existing file (its done rows, and those of its journal, are reported by done_rows()), throwing
  // Error(exit 2) if its job_yaml/model/task/num_rows or input/model fingerprints differ from info's,
  // unless absent; done rows that do not read back are reported as not done. An empty file at the
  // path is taken as absent. Any mode throws JobError (exit 2), before touching the output, when
  // another job holds its lock. Rows written are flushed as `flush` says.
  static std::unique_ptr<ResultWriter> open(const std::string& path, IfExists if_exists, const RunInfo& info,
                                            FlushPolicy flush = {});
  virtual ~ResultWriter() = default;

  virtual const std::vector<uint8_t>& done_rows() const = 0;  // size num_rows
  virtual void write(RowResult row) = 0;      // buffered; flushes as the FlushPolicy says
  virtual void flush() = 0;                   // records buffered rows durably now: from then on they are done
  virtual void finish(const RunMetrics& metrics) = 0;  // flush, metrics, `complete`, commit
};

// "" when every row is done, else which rows are not: "3 rows are missing: input lines 5, 9, 12";
// with `samples` (lines have several rows) the 0-based results rows instead. Only the rows of
// `rows` count (a shard's; end -1: to the end).
std::string describe_missing_rows(const std::vector<uint8_t>& done, bool samples = false, IndexRange rows = {0, -1});

// A fresh identifier for a committed results file: a journal extends exactly the commit it names.
std::string new_commit_id();

}  // namespace tpbatch
