#include "engine/row_dispatcher.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "common/error.h"
#include "common/log.h"
#include "reliability/fault_injection.h"
#include "reliability/shutdown.h"

namespace tpbatch {
namespace {

// WORK message: [u8 exhausted][u32 count] then per line [i64 index][i64 first_row][u32 samples]
// [i32 sample]... [u32 length][bytes].
std::string encode_work(const std::vector<WorkItem>& items, bool exhausted) {
  std::string m;
  m.push_back(exhausted ? 1 : 0);
  const uint32_t n = static_cast<uint32_t>(items.size());
  m.append(reinterpret_cast<const char*>(&n), 4);
  for (const auto& it : items) {
    const uint32_t len = static_cast<uint32_t>(it.line.size()), k = static_cast<uint32_t>(it.samples.size());
    m.append(reinterpret_cast<const char*>(&it.index), 8);
    m.append(reinterpret_cast<const char*>(&it.first_row), 8);
    m.append(reinterpret_cast<const char*>(&k), 4);
    m.append(reinterpret_cast<const char*>(it.samples.data()), 4 * k);
    m.append(reinterpret_cast<const char*>(&len), 4);
    m.append(it.line);
  }
  return m;
}

bool decode_work(const std::string& m, std::vector<WorkItem>& out) {
  size_t at = 0;
  auto need = [&](size_t n) {
    if (at + n > m.size()) throw Error("corrupt work message from rank 0");
  };
  need(5);
  const bool exhausted = m[0] != 0;
  uint32_t n;
  std::memcpy(&n, m.data() + 1, 4);
  at = 5;
  for (uint32_t i = 0; i < n; ++i) {
    WorkItem it;
    uint32_t len, k;
    need(20);
    std::memcpy(&it.index, m.data() + at, 8);
    std::memcpy(&it.first_row, m.data() + at + 8, 8);
    std::memcpy(&k, m.data() + at + 16, 4);
    at += 20;
    need(4 * static_cast<size_t>(k) + 4);
    it.samples.resize(k);
    std::memcpy(it.samples.data(), m.data() + at, 4 * static_cast<size_t>(k));
    std::memcpy(&len, m.data() + at + 4 * static_cast<size_t>(k), 4);
    at += 4 * static_cast<size_t>(k) + 4;
    need(len);
    it.line.assign(m.data() + at, len);
    at += len;
    out.push_back(std::move(it));
  }
  return exhausted;
}

class LocalWorkSource final : public WorkSource {
 public:
  explicit LocalWorkSource(RowDispatcher& d) : d_(d) {}
  bool take(std::vector<WorkItem>& out, size_t max_items, bool wait) override {
    const bool more = d_.read_rows(out, max_items, 0);
    if (more && wait && out.empty()) d_.serve(true);  // other replicas' rows may come back: wait for news
    return more;
  }
  void submit(const RowResult& r) override { d_.record(r); }
  void poll() override { d_.serve(false); }
  void close() override {}

 private:
  RowDispatcher& d_;
};

class RemoteWorkSource final : public WorkSource {
 public:
  explicit RemoteWorkSource(MPI_Comm control) : control_(control) {}

  bool take(std::vector<WorkItem>& out, size_t max_items, bool wait) override {
    if (exhausted_) return false;
    if (!requested_ && max_items > 0) {  // prefetch: one request in flight at a time
      const int32_t n = static_cast<int32_t>(max_items);
      control_.send(std::string(reinterpret_cast<const char*>(&n), sizeof n), 0, kTagRequest);
      requested_ = true;
    }
    ControlMessage work;
    if (wait) {
      work = control_.recv(0, kTagWork);
    } else if (!control_.try_recv(0, kTagWork, work)) {
      return true;
    }
    exhausted_ = decode_work(work.bytes, out);
    requested_ = false;
    return !exhausted_;
  }

  void submit(const RowResult& r) override {
    control_.send(serialize(r), 0, kTagResult);
    control_.release_completed();
  }

  void poll() override { control_.release_completed(); }

  void close() override {
    // A request still unanswered (the replica stopped early): take the answer, so rank 0 is not
    // left sending to nobody; its rows come back to rank 0 as held by this replica.
    if (requested_ && !exhausted_) {
      std::vector<WorkItem> unused;
      decode_work(control_.recv(0, kTagWork).bytes, unused);
      requested_ = false;
    }
    control_.send(std::string(1, '\0'), 0, kTagDone);  // after every result: messages keep their order
    control_.drain();
  }

 private:
  ControlChannel control_;
  bool requested_ = false;
  bool exhausted_ = false;
};

}  // namespace

RowDispatcher::RowDispatcher(const std::string& input_path, const JobSpec& job, int64_t lines,
                             std::vector<uint8_t> done_rows, ResultWriter& writer, Progress& progress, MPI_Comm control,
                             int remote_replicas)
    : input_path_(input_path),
      job_(job),
      lines_(lines),
      reader_(input_path),
      done_(std::move(done_rows)),
      writer_(writer),
      progress_(progress),
      control_(control),
      remote_replicas_(remote_replicas),
      end_line_(lines) {}

// The job's lines are the `lines_` counted when it started; its rows the done_.size() results rows
// they make (each line samples_of_line() rows, consecutive: the results file's num_rows).
bool RowDispatcher::next_input_row(WorkItem& item) {
  const int64_t rows = static_cast<int64_t>(done_.size());
  std::string line;
  while (!input_done_) {
    if (next_index_ >= end_line_) {
      input_done_ = true;
      if (end_line_ < lines_) break;  // a shard's lines end here: the rest are other shards'

      if (reader_.next(line))
        log_warning("input file '%s' has more rows than the %lld it had when the job "
                     "started (appended while it ran?): they are not part of this job",
                     input_path_.c_str(), static_cast<long long>(lines_));
      if (next_row_ != rows) throw changed_input();
      break;
    }
    if (!reader_.next(line))
      throw Error("input file '" + input_path_ + "' ends after " + std::to_string(next_index_) + " rows, but it had " +
                  std::to_string(lines_) + " when the job started: it was truncated or rewritten while the job ran "
                  "(rows already done are kept; rerun the job on a stable input with output.if_exists: resume)");
    const int64_t index = next_index_++;
    const int64_t first_row = next_row_, samples = samples_of_line(line, job_);
    next_row_ += samples;
    if (next_row_ > rows) throw changed_input();
    if (index < begin_line_) continue;  // another shard's line
    std::vector<int32_t> todo;
    for (int64_t s = 0; s < samples; ++s)
      if (!done_[static_cast<size_t>(first_row + s)]) todo.push_back(static_cast<int32_t>(s));
    if (todo.empty()) continue;  // resume: already done
    item = WorkItem{index, first_row, std::move(todo), std::move(line)};
    return true;
  }
  return false;
}

Error RowDispatcher::changed_input() const {
  return Error("input file '" + input_path_ + "' no longer has the " + std::to_string(done_.size()) +
               " results rows (lines times their samples, n) it had when the job started: it was rewritten while "
               "the job ran (rows already done are kept; rerun the job on a stable input with output.if_exists: "
               "resume)");
}

// A replica takes at most its fair share of the lines not yet finished (unread, to hand out again, or
// held by anyone), less what it holds: otherwise rank 0's replica, whose requests are served first and
// which keeps max_seqs + lookahead lines, took every line of a small job (or of any job's tail) before
// another replica's first request was served, and the replicas ran one after the other (a 32-row DP=2
// job: replica 0 ran 128 steps, replica 1 none).
size_t RowDispatcher::fair_share(int holder) const {
  size_t in_flight = 0;
  for (const auto& [rank, rows] : held_) in_flight += rows.size();
  const size_t unread = static_cast<size_t>(std::max<int64_t>(0, end_line_ - std::max(next_index_, begin_line_)));
  const size_t open = unread + again_.size() + in_flight;
  const size_t replicas = static_cast<size_t>(std::max(1, remote_replicas_ - remote_done_ + 1));
  if (replicas == 1) return SIZE_MAX;  // nobody to share with
  const size_t share = (open + replicas - 1) / replicas;
  const auto it = held_.find(holder);
  const size_t holds = it == held_.end() ? 0 : it->second.size();
  return share > holds ? share - holds : 0;
}

bool RowDispatcher::read_rows(std::vector<WorkItem>& out, size_t max_items, int holder) {
  size_t taken = 0;
  if (stop_requested()) exhausted_ = true;  // graceful stop: hand out no more rows
  max_items = std::min(max_items, fair_share(holder));
  while (!exhausted_ && taken < max_items) {
    WorkItem item;
    if (!again_.empty()) {
      item = std::move(again_.front());
      again_.pop_front();
    } else if (!next_input_row(item)) {
      exhausted_ = true;
      break;
    }
    held_[holder][item.index] = item;
    ++handed_[holder];
    out.push_back(std::move(item));
    ++taken;
  }
  // Stopped by the share with every line read: say so now (no line is consumed), or replicas asking
  // when nothing is open would be told "more" forever and the job would never end.
  if (!exhausted_ && again_.empty() && next_index_ >= end_line_) {
    WorkItem none;
    if (!next_input_row(none)) exhausted_ = true;
  }
  if (!exhausted_) return true;
  // Rank 0's own replica keeps asking while other replicas hold rows: one that ends without
  // finishing them hands them back, and someone must be there to take them.
  if (holder == 0 && !stop_requested())
    for (const auto& [rank, rows] : held_)
      if (rank != 0 && !rows.empty()) return true;
  return false;
}

void RowDispatcher::restrict_to_lines(IndexRange lines) {
  begin_line_ = std::clamp<int64_t>(lines.begin, 0, lines_);
  end_line_ = std::clamp<int64_t>(lines.end, begin_line_, lines_);
}

void RowDispatcher::replica_done(int rank) {
  ++remote_done_;
  auto it = held_.find(rank);
  if (it == held_.end() || it->second.empty()) return;
  const size_t n = it->second.size();
  for (auto& [index, item] : it->second) again_.push_back(std::move(item));  // the samples not yet returned
  held_.erase(it);
  // Handed out again only if some replica will still ask (exhausted_: all were told "no more").
  if (!stop_requested()) exhausted_ = false;  // replica 0, at least, is still asking
  log_warning("the replica led by rank %d ended with %zu rows unfinished (was it "
               "signalled?): they are handed out again", rank, n);
}

void RowDispatcher::record(const RowResult& row) {
  for (auto& [rank, items] : held_) {
    auto it = items.find(row.line);
    if (it == items.end()) continue;
    std::vector<int32_t>& samples = it->second.samples;
    samples.erase(std::remove(samples.begin(), samples.end(), row.sample), samples.end());
    if (samples.empty()) items.erase(it);
  }
  if (row.warning_kind != kNoWarning && !warned_[row.warning_kind]) {  // once per job, whichever replica
    warned_[row.warning_kind] = true;
    log_warning("%s", row.warning.c_str());
  }
  progress_.row_done(row, row.ttft_seconds, row.tpot_seconds);
  writer_.write(row);  // flushed as the writer's FlushPolicy says
  const bool test_stop = test_stops_after_rows(++recorded_);
  if (test_stop) writer_.flush();
  progress_.maybe_print();
  if (test_stop)
    stop_self_for_test("rank 0 stops itself (SIGSTOP) after recording and flushing " + std::to_string(recorded_) +
                       " rows (TPBATCH_TEST_STOP_AFTER_ROWS)");
}

void RowDispatcher::handle(const ControlMessage& m) {
  if (m.tag == kTagRequest || m.tag == kTagDone) heard_.insert(m.source);
  if (m.tag == kTagRequest) {
    int32_t want = 0;
    std::memcpy(&want, m.bytes.data(), std::min<size_t>(4, m.bytes.size()));
    std::vector<WorkItem> items;
    const bool more = read_rows(items, static_cast<size_t>(want), m.source);
    control_.send(encode_work(items, !more), m.source, kTagWork);
  } else if (m.tag == kTagResult) {
    record(deserialize_row_result(m.bytes));
  } else if (m.tag == kTagDone) {
    replica_done(m.source);
  }
}

void RowDispatcher::serve(bool wait) {
  progress_.maybe_print();  // every step of replica 0 passes here: progress while no row ends
  control_.release_completed();  // answers already delivered
  for (;;) {
    ControlMessage m;
    if (wait) {
      m = control_.recv(ControlChannel::kAnySource, ControlChannel::kAnyTag);
      wait = false;
    } else if (!control_.try_recv(ControlChannel::kAnySource, ControlChannel::kAnyTag, m)) {
      return;
    }
    handle(m);
  }
}

void RowDispatcher::serve_first_requests() {
  // Every leader asks as soon as it enters its loop (right after a collective), so this waits
  // milliseconds; a leader that fails instead aborts the job, one stopped by a signal says it is done.
  while (heard_.size() < static_cast<size_t>(remote_replicas_)) serve(true);
}

std::string RowDispatcher::lines_per_replica() const {
  std::string s;
  for (const auto& [rank, lines] : handed_)
    s += (s.empty() ? "" : ", ") + std::string("rank ") + std::to_string(rank) + ": " + std::to_string(lines);
  return s.empty() ? "none" : s;
}

std::unique_ptr<WorkSource> make_local_work_source(RowDispatcher& d) { return std::make_unique<LocalWorkSource>(d); }
std::unique_ptr<WorkSource> make_remote_work_source(MPI_Comm control) {
  return std::make_unique<RemoteWorkSource>(control);
}

}  // namespace tpbatch
