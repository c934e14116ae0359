// The results file's durability protocol: lock, journal, commit by rename (result_writer.h).
#include "io/result_writer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "common/error.h"
#include "common/log.h"
#include "io/file_commit.h"
#include "io/output_lock.h"
#include "io/output_paths.h"
#include "io/results_file.h"
#include "io/row_journal.h"
#include "tokenizer/utf8.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBufferRows = 1024;  // rows in memory at a time when a file is rebuilt or a journal replayed

// ---- strings -----------------------------------------------------------------------------------------

// Replaces each byte that does not start a valid UTF-8 sequence with U+FFFD, so every stored
// string is valid UTF-8. One U+FFFD per invalid byte, as the results files have always held: not
// tok::utf8_lossy's one per maximal invalid subpart (a truncated 3-byte sequence is two here, one there).
void sanitize_utf8(std::string& s) {
  if (tok::utf8_is_valid(s)) return;  // the common case, no copy
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t l = tok::utf8_valid_len(s, i);
    if (l == 0) {
      out.append(tok::kReplacementChar);
      ++i;
    } else {
      out.append(s, i, l);
      i += l;
    }
  }
  s = std::move(out);
}

}  // namespace

// A fresh identifier for each committed file: a journal extends exactly the commit it names.
std::string new_commit_id() { return new_random_id(); }

namespace {

// ---- the writer ----------------------------------------------------------------------------------------

class CommittingResultWriter final : public ResultWriter {
 public:
  CommittingResultWriter(OutputPaths paths, const RunInfo& info, OutputLock lock, FlushPolicy flush)
      : lock_(std::move(lock)), paths_(std::move(paths)), info_(info), flush_policy_(flush) {}

  ~CommittingResultWriter() override {
    if (finished_) return;
    if (!failed_) {
      try {
        flush();  // into the journal: a resume finds them
      } catch (...) {
      }
    }
    try {
      work_.reset();  // the partial file is never committed now: it goes
    } catch (...) {
    }
    std::error_code ec;
    fs::remove(paths_.partial, ec);
    // A run that ended before its first row made nothing: the lock file it created goes too (a
    // journal with content is an earlier run's, extending the file that is still there).
    if (fresh_pending_ && fs::exists(paths_.journal, ec) && fs::file_size(paths_.journal, ec) == 0 && !ec)
      lock_.remove_and_release();
  }

  // A new results file, made when the first row is recorded (or at finish): until then the output
  // path keeps what it held, so a run that fails before any row (a missing tokenizer, a device it
  // does not have, weights that do not load) leaves an earlier job's file as it was.
  void start_fresh() {
    fresh_pending_ = true;
    done_.assign(static_cast<size_t>(info_.num_rows), 0);
  }

  // The new, empty results file, committed (the output path never holds a half-made file), then a
  // journal extending it.
  void commit_fresh_file() {
    if (!fresh_pending_) return;
    fresh_pending_ = false;
    const std::string commit = new_commit_id();
    {
      ResultsFile f = ResultsFile::create(paths_.partial, name(), info_);
      f.set_commit_id(commit);
      f.close();
    }
    commit_by_rename(paths_.partial, paths_.file, name());
    journal_ = RowJournal::start(paths_.journal, commit, name());
    begin_partial_copy();
  }

  void resume() {
    // The hint never offers overwrite first: it discards every done row, where rerunning with the
    // settings the file was written with (or another output.path) loses nothing.
    auto refuse = [&](const std::string& why) {
      throw JobError("output '" + name() + "' exists but cannot be resumed: " + why +
                     " (rerun with what the file was written with, or choose another output.path; output.if_exists: "
                     "overwrite would replace it, discarding its done rows)");
    };
    htri_t is = H5Fis_hdf5(paths_.file.c_str());
    H5Eclear2(H5E_DEFAULT);
    if (is <= 0) refuse("it is not an HDF5 file");
    std::optional<ResultsReader> committed;
    try {
      committed.emplace(ResultsReader::open(paths_.file, name()));
    } catch (const Error& e) {
      refuse(e.what());
    }
    if (const std::string why = committed->resume_refusal(info_); !why.empty()) refuse(why);
    const int64_t grown_from = committed->rows_to_grow_to() ? committed->num_rows() : 0;
    done_ = committed->read_done();
    const std::vector<uint8_t> marked = done_;
    committed->drop_unreadable_done_rows(done_);
    const std::string base = committed->commit_id();
    if (committed->writer_open()) {
      rebuild_from(*committed);  // written in place by an older tpbatch that was cut off
    } else {
      committed->close();
      committed.reset();
      begin_partial_copy();
      if (done_ != marked) work_->write_done(done_);
    }
    if (grown_from) {
      if (work_->num_rows() < info_.num_rows) work_->grow(info_.num_rows);
      done_.resize(static_cast<size_t>(info_.num_rows), 0);
      log_info("results file '%s': the input grew from %lld to %lld rows, its first %lld lines "
                   "unchanged: only the new ones are computed", name().c_str(), static_cast<long long>(grown_from),
                   static_cast<long long>(info_.num_rows), static_cast<long long>(grown_from));
    }
    replay_journal(base);
  }

  const std::vector<uint8_t>& done_rows() const override { return done_; }

  void write(RowResult row) override {
    if (finished_) throw Error("results file '" + name() + "': write after finish");
    if (failed_) throw Error("results file '" + name() + "': write after a failed flush");
    if (row.index < 0) throw Error("results file '" + name() + "': negative row index " + std::to_string(row.index));
    sanitize_utf8(row.id);
    sanitize_utf8(row.output_text);
    sanitize_utf8(row.reasoning_text);
    sanitize_utf8(row.error);
    int64_t idx = row.index;
    buffer_[idx] = std::move(row);
    if (static_cast<int64_t>(buffer_.size()) >= flush_policy_.rows ||
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_flush_).count() >= flush_policy_.seconds)
      flush();
  }

  // The journal first: once its append returns (synced), the rows are done, whatever happens to the
  // partial file, which is only written (never synced) until the commit.
  void flush() override {
    if (failed_ || (!work_ && !fresh_pending_)) return;
    try {
      if (!buffer_.empty()) {
        commit_fresh_file();
        std::vector<const RowResult*> rows;
        rows.reserve(buffer_.size());
        for (const auto& [idx, r] : buffer_) rows.push_back(&r);
        journal_.append(rows);
        for (const RowResult* r : rows) {
          if (r->index >= static_cast<int64_t>(done_.size())) done_.resize(static_cast<size_t>(r->index) + 1, 0);
          done_[static_cast<size_t>(r->index)] = 1;
        }
        work_->write_rows(rows);
        buffer_.clear();
      }
    } catch (const Error&) {
      failed_ = true;
      throw;
    }
    last_flush_ = std::chrono::steady_clock::now();
  }

  // The commit: the partial file, closed and synced, replaces the results file; then the journal,
  // whose rows it now holds, goes.
  void finish(const RunMetrics& m) override {
    if (finished_) return;
    if (failed_) throw Error("results file '" + name() + "': not finished: an earlier write failed");
    flush();
    try {
      commit_fresh_file();  // a run that recorded no row still leaves its (empty) file
      work_->add_run_metrics(m);
      // A shard's file is complete with its own rows.
      const IndexRange wanted = info_.rows_wanted();
      const int64_t rows = static_cast<int64_t>(done_.size());
      work_->set_complete(std::all_of(done_.begin() + std::min(wanted.begin, rows), done_.begin() + std::min(wanted.end, rows),
                                      [](uint8_t v) { return v != 0; }));
      work_->set_writer_open(false);
      work_->set_commit_id(new_commit_id());
      work_->close();
      work_.reset();
      commit_by_rename(paths_.partial, paths_.file, name());
    } catch (const Error&) {
      failed_ = true;
      throw;
    }
    finished_ = true;
    journal_.close();
    lock_.remove_and_release();  // the journal is the lock file
  }

 private:
  const std::string& name() const { return paths_.given; }

  // The partial file a run writes: a byte copy of the committed results file, this run's attributes.
  void begin_partial_copy() {
    copy_file(paths_.file, paths_.partial, name());
    work_.emplace(ResultsFile::open(paths_.partial, name()));
    if (const std::string why = work_->resume_refusal(info_); !why.empty())
      throw Error("results file '" + name() + "': its copy '" + paths_.partial + "' cannot be written: " + why);
    work_->bring_to_current_format();
    start_run_attrs();
  }

  void start_run_attrs() {
    work_->write_run_attrs(info_);  // this run's settings (layout, engine) replace the previous run's
    work_->set_writer_open(true);
    work_->set_complete(false);
  }

  // A file an older tpbatch wrote in place and did not close: its verified done rows are copied into
  // a fresh file, so that nothing written from now on shares HDF5 structures with a half-updated state.
  void rebuild_from(ResultsReader& old) {
    work_.emplace(ResultsFile::create(paths_.partial, name(), info_));
    if (const std::string id = old.job_id(); !id.empty()) work_->set_job_id(id);  // the same job
    work_->add_metric_totals_from(old);
    start_run_attrs();
    const int64_t rows = static_cast<int64_t>(done_.size());
    int64_t copied = 0;
    for (int64_t start = 0; start < rows; start += static_cast<int64_t>(kBufferRows)) {
      const int64_t count = std::min<int64_t>(static_cast<int64_t>(kBufferRows), rows - start);
      if (std::none_of(done_.begin() + start, done_.begin() + start + count, [](uint8_t v) { return v; })) continue;
      std::vector<RowResult> got = old.read_rows(start, count);
      std::vector<const RowResult*> keep;
      for (const RowResult& r : got)
        if (done_[static_cast<size_t>(r.index)]) keep.push_back(&r);
      work_->write_rows(keep);
      copied += static_cast<int64_t>(keep.size());
    }
    log_info("results file '%s' was not closed by its last run: its %lld done rows were "
                 "copied into a fresh file", name().c_str(), static_cast<long long>(copied));
  }

  // Rows of a journal extending the committed file (`base`) go into the partial file and count as
  // done; the journal goes on after its last whole record. Any other journal (of an earlier commit,
  // or none) is started afresh: its rows are in the committed file or belong to another file.
  void replay_journal(const std::string& base) {
    int64_t replayed = 0, beyond = 0;
    std::map<int64_t, RowResult> batch;
    auto write_batch = [&] {
      std::vector<const RowResult*> rows;
      for (const auto& [idx, r] : batch) rows.push_back(&r);
      work_->write_rows(rows);
      batch.clear();
    };
    const JournalContents c = read_journal(paths_.journal, name(), base, [&](RowResult&& r) {
      if (r.index >= static_cast<int64_t>(done_.size())) {
        ++beyond;
        return;
      }
      done_[static_cast<size_t>(r.index)] = 1;
      ++replayed;
      batch[r.index] = std::move(r);
      if (batch.size() >= kBufferRows) write_batch();
    });
    write_batch();
    if (c.has_header && c.base_commit == base) {
      journal_ = RowJournal::resume(paths_.journal, c, name());
      if (replayed)
        log_info("results file '%s': %lld rows finished by its last run were replayed from "
                     "its journal", name().c_str(), static_cast<long long>(replayed));
      if (beyond)
        log_warning("results file '%s': %lld journal rows lie past its %zu rows and "
                     "were ignored", name().c_str(), static_cast<long long>(beyond), done_.size());
    } else {
      journal_ = RowJournal::start(paths_.journal, base, name());
    }
  }

  OutputLock lock_;  // first: released after everything else is closed
  OutputPaths paths_;
  RunInfo info_;
  FlushPolicy flush_policy_;
  RowJournal journal_;
  std::optional<ResultsFile> work_;  // the partial file
  std::vector<uint8_t> done_;
  std::map<int64_t, RowResult> buffer_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  bool finished_ = false;
  bool failed_ = false;   // a flush failed: nothing more is written
  bool fresh_pending_ = false;  // start_fresh: the new file is not made yet (commit_fresh_file)
};

}  // namespace

std::string describe_missing_rows(const std::vector<uint8_t>& done, bool samples, IndexRange rows) {
  int64_t missing = 0;
  std::string list;
  const size_t end = rows.end < 0 ? done.size() : std::min(done.size(), static_cast<size_t>(rows.end));
  for (size_t i = static_cast<size_t>(std::max<int64_t>(0, rows.begin)); i < end; ++i) {
    if (done[i]) continue;
    if (++missing <= 10) list += (list.empty() ? "" : ", ") + std::to_string(samples ? i : i + 1);
  }
  if (!missing) return "";
  const std::string what = samples ? " results row" : " input line";  // lines with n > 1 have several rows
  return std::to_string(missing) + (missing == 1 ? " row is" : " rows are") + " missing:" + what +
         (missing == 1 ? " " : "s ") + list + (missing > 10 ? ", ..." : "");
}

std::unique_ptr<ResultWriter> ResultWriter::open(const std::string& path, IfExists if_exists, const RunInfo& info,
                                                 FlushPolicy flush) {
  h5::quiet_hdf5();
  if (info.num_rows < 0) throw Error("results file '" + path + "': negative num_rows");
  const OutputPaths paths = output_paths(path);
  std::error_code ec;
  const bool exists = fs::exists(paths.file, ec);
  if (exists && fs::is_directory(paths.file, ec)) throw JobError("output '" + path + "' is a folder");
  if (exists && if_exists == IfExists::kFail) throw JobError("output '" + path + "' exists (output.if_exists: fail)");
  fs::path parent = fs::path(paths.file).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  // Locked before anything touches the output: a job running on it keeps its rows.
  OutputLock lock = OutputLock::acquire(paths.journal, path);
  auto w = std::make_unique<CommittingResultWriter>(paths, info, std::move(lock), flush);
  // An empty file holds no rows to keep: what a job killed while creating it left behind, in
  // tpbatch versions that created the file in place.
  const bool has_content = exists && fs::file_size(paths.file, ec) > 0;
  if (has_content && if_exists == IfExists::kResume)
    w->resume();
  else
    w->start_fresh();
  return w;
}

}  // namespace tpbatch
