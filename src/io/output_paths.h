#pragma once
// Where a job's output lives on the disk, and the rule that it never lands on a path the job reads.
// The results file is `output.path` with symbolic links resolved (a link keeps pointing at the
// file, which is replaced beside its target); beside it, while a run writes it, are its journal
// (row_journal.h) and the file the run builds (`.partial`), renamed over it when the run commits.
#include <string>

#include "job/job_spec.h"

namespace tpbatch {

struct OutputPaths {
  std::string given;    // output.path as the job names it: what messages say
  std::string file;     // the results file: `given` with symbolic links resolved
  std::string journal;  // file + ".journal"
  std::string partial;  // file + ".partial"
};

OutputPaths output_paths(const std::string& given);

// True when a and b name the same file: the same path once resolved, or the same inode (a hard link).
bool same_file(const std::string& a, const std::string& b);

// Throws JobError (exit 2) naming both paths when the results file, its journal or its partial file
// would be a file the job reads: the input, the job file, the chat template, or a file of the model
// folder. Checked before anything is written.
void check_output_apart_from_inputs(const JobSpec& job, const std::string& job_file);

}  // namespace tpbatch
