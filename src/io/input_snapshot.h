#pragma once
// The input as the job sees it at start: its row count and its fingerprint (for resume). The input
// must be a regular file: the job reads it more than once (count, fingerprint, then the rows), which
// a pipe or FIFO cannot give (a pipe would read as empty, a FIFO would block on the second open),
// and resume needs the same bytes again. It must also not change while it is read here.
#include <cstdint>
#include <string>

#include "job/job_spec.h"

namespace tpbatch {

struct InputSnapshot {
  int64_t lines = 0;         // input rows (JSONL lines)
  int64_t rows = 0;          // results rows: each line's samples_of_line() (= lines unless n > 1)
  std::string fingerprint;   // input_fingerprint(): "<bytes>:<hash>"
  IndexRange shard_lines;    // job.shard's lines (all of them for the whole job)
  IndexRange shard_rows;     // the results rows of those lines
};

// A sharded job's ranges need a second pass over the input only when some line has several rows.
// Throws JobError (exit 2) for a path that is not a regular file, Error when it changes while read.
InputSnapshot snapshot_input(const std::string& path, const JobSpec& job);

}  // namespace tpbatch
