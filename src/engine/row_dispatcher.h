#pragma once
// World rank 0's side of data parallelism: it streams the JSONL file, hands rows to replicas as
// they ask for them (replica 0 directly, the others over MPI), and writes every result into the
// one HDF5 file. Memory stays bounded: rows are read only when a replica asks for them.
//
// No row is lost silently: the dispatcher remembers which replica holds which rows until their
// results arrive. A replica that ends while still holding rows (its leader was signalled: the OOM
// killer, an admin) gets them handed out again to the replicas still running; rows nobody can take
// any more stay not done, and run_job fails naming them. The input must stay as it was when the
// job started: a file that ends early is an error naming it; rows appended later are not read.
#include <mpi.h>

#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "comm/control_channel.h"
#include "common/error.h"
#include "engine/progress.h"
#include "engine/work_source.h"
#include "io/input_row.h"
#include "io/result_writer.h"

namespace tpbatch {

// Message tags on the control communicator (a duplicate of MPI_COMM_WORLD).
enum ControlTag : int { kTagRequest = 101, kTagWork = 102, kTagResult = 103, kTagDone = 104 };

class RowDispatcher {
 public:
  // `lines`: the input's line count at start; done_rows: one flag per results row (a line has
  // samples_of_line() rows, consecutive).
  RowDispatcher(const std::string& input_path, const JobSpec& job, int64_t lines, std::vector<uint8_t> done_rows,
                ResultWriter& writer, Progress& progress, MPI_Comm control, int remote_replicas);

  // Hands out only the input lines of `lines` (a shard's); before the first read_rows.
  void restrict_to_lines(IndexRange lines);
  // Next rows not yet done (resume skips finished ones) for the replica led by world rank
  // `holder`; false when nothing more will be handed out.
  bool read_rows(std::vector<WorkItem>& out, size_t max_items, int holder = 0);
  void record(const RowResult& row);
  // Serves pending requests and results from other replicas; with wait, blocks for one message.
  void serve(bool wait);
  // Before replica 0's first step: every other replica's first request (or its end) is served, so
  // each starts with its share; served only between replica 0's steps, a replica would otherwise
  // wait out replica 0's whole first prefill (seconds on a CPU) with nothing to do.
  void serve_first_requests();
  bool remote_replicas_done() const { return remote_done_ == remote_replicas_; }
  // "rank 0: 16, rank 1: 16": lines handed to each replica, by its leader's rank (again ones too).
  std::string lines_per_replica() const;

 private:
  void handle(const ControlMessage& message);
  void replica_done(int rank);
  bool next_input_row(WorkItem& item);
  size_t fair_share(int holder) const;  // how many more lines `holder` may take now
  Error changed_input() const;
  std::string input_path_;
  const JobSpec& job_;
  int64_t lines_;
  JsonlReader reader_;
  std::vector<uint8_t> done_;
  ResultWriter& writer_;
  Progress& progress_;
  ControlChannel control_;
  int remote_replicas_;
  int remote_done_ = 0;
  bool exhausted_ = false;           // nothing more is handed out (input read, nothing to hand out again)
  bool input_done_ = false;          // every input row was read
  int64_t next_index_ = 0;           // next input line
  int64_t next_row_ = 0;             // its first results row
  int64_t begin_line_ = 0;           // the lines handed out: [begin_line_, end_line_)
  int64_t end_line_ = 0;
  // rank -> lines handed out with their samples not yet returned
  std::map<int, std::map<int64_t, WorkItem>> held_;
  std::deque<WorkItem> again_;       // lines of replicas that ended without them: handed out first
  std::map<int, int64_t> handed_;    // rank -> lines handed to its replica
  std::set<int> heard_;              // remote leaders that have asked for rows or ended
  bool warned_[kNumRowWarnings] = {};
  int64_t recorded_ = 0;             // rows recorded by this run
};

// Replica 0's work source: calls the dispatcher on the same rank.
std::unique_ptr<WorkSource> make_local_work_source(RowDispatcher& dispatcher);
// Every other replica leader's work source: MPI messages to world rank 0.
std::unique_ptr<WorkSource> make_remote_work_source(MPI_Comm control);

}  // namespace tpbatch
