// `tpbatch inspect`: a summary of a results file. Read-only, and without HDF5's file lock, so it
// works on the file of a job that is still running: the file is its last commit, and the rows
// finished since are read from its journal (result_writer.h).
#include "io/inspect_results.h"

#include <algorithm>
#include <chrono>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <thread>
#include <vector>

#include "common/error.h"
#include "io/finish_reason.h"
#include "io/output_lock.h"
#include "io/output_paths.h"
#include "io/results_reader.h"
#include "io/row_journal.h"

namespace tpbatch {
namespace {

constexpr int64_t kChunkRows = 1024;  // rows in memory at a time

std::string fmt(double v, int prec) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}

// The done rows' figures: how many, errors (the first few named), tokens, finish reasons.
struct RowTally {
  int64_t done = 0, errors = 0, prompt_tokens = 0, output_tokens = 0;
  std::vector<std::string> first_errors;
  std::map<std::string, int64_t> reasons;

  void add(const RowResult& r) {
    ++done;
    prompt_tokens += static_cast<int64_t>(r.prompt_tokens.size());
    output_tokens += static_cast<int64_t>(r.output_tokens.size());
    reasons[r.finish_reason ? std::string(finish_reason_name(r.finish_reason)) : "(none)"]++;
    if (r.error.empty()) return;
    ++errors;
    if (first_errors.size() >= 5) return;
    std::ostringstream line;  // (not string concatenation: GCC 12 warns falsely on it here)
    line << "row " << r.index << " (id " << r.id << "): " << r.error;
    first_errors.push_back(line.str());
  }
};

// Rows finished since the file's last commit, from the journal extending it (a running job's, or
// a stopped one's that a resume will replay), without the fields inspect does not count.
std::map<int64_t, RowResult> journal_rows_of(const ResultsReader& f, int64_t num_rows) {
  std::map<int64_t, RowResult> rows;
  read_journal(output_paths(f.name()).journal, f.name(), f.commit_id(), [&](RowResult&& r) {
    if (r.index < 0 || r.index >= num_rows) return;
    r.output_logprobs.clear(), r.top_logprobs.clear(), r.top_logprob_tokens.clear(), r.embedding.clear();
    r.output_text.clear(), r.reasoning_text.clear();
    rows[r.index] = std::move(r);
  });
  return rows;
}

RowTally tally_rows(ResultsReader& f, const std::map<int64_t, RowResult>& journal_rows) {
  RowTally tally;
  for (int64_t start = 0; start < f.num_rows(); start += kChunkRows) {
    const int64_t count = std::min(kChunkRows, f.num_rows() - start);
    const std::vector<uint8_t> done = f.read_done(start, count);
    if (std::none_of(done.begin(), done.end(), [](uint8_t v) { return v; })) continue;
    for (const RowResult& r : f.read_rows(start, count))
      if (done[static_cast<size_t>(r.index - start)] && !journal_rows.count(r.index)) tally.add(r);
  }
  for (const auto& [row, r] : journal_rows) tally.add(r);
  return tally;
}

void print_metrics(const ResultsReader& f, std::ostream& out) {
  if (!f.has_metrics()) {
    out << "metrics     none yet (the run has not finished)\n";
    return;
  }
  auto d = [&](const char* name) { return f.metric(name).value_or(0.0); };
  out << "wall        " << fmt(d("wall_seconds"), 2) << " s\n";
  out << "throughput  " << fmt(d("output_tokens_per_second"), 1) << " output tokens/s, "
      << fmt(d("total_tokens_per_second"), 1) << " total tokens/s\n";
  if (d("ttft_p50_seconds") > 0)
    out << "ttft        p50 " << fmt(d("ttft_p50_seconds"), 3) << " s, p90 " << fmt(d("ttft_p90_seconds"), 3)
        << " s, p99 " << fmt(d("ttft_p99_seconds"), 3) << " s\n";
  if (d("tpot_p50_seconds") > 0)
    out << "tpot        p50 " << fmt(d("tpot_p50_seconds") * 1e3, 2) << " ms, p90 "
        << fmt(d("tpot_p90_seconds") * 1e3, 2) << " ms, p99 " << fmt(d("tpot_p99_seconds") * 1e3, 2) << " ms\n";
}

void print_rows(const ResultsReader& f, const RunInfo& info, const RowTally& tally, size_t from_journal,
                std::ostream& out) {
  // A shard's file holds the job's every row but computes only its shard's.
  const bool sharded = info.shard.sharded();
  const int64_t wanted = info.rows_wanted().end - info.rows_wanted().begin;
  if (sharded)
    out << "shard       " << info.shard.index << " of " << info.shard.count << ": input lines "
        << info.shard_lines.begin + 1 << " to " << info.shard_lines.end << ", results rows " << info.shard_rows.begin
        << " to " << info.shard_rows.end - 1 << " of " << info.num_rows
        << " (tpbatch merge joins the shards' files)\n";
  out << "rows        " << tally.done << " / " << wanted << " done" << (sharded ? " (of the shard)" : "");
  if (wanted > 0) out << " (" << fmt(100.0 * static_cast<double>(tally.done) / static_cast<double>(wanted), 1) << "%)";
  out << "\n";
  out << "complete    " << (f.int_attribute("complete") ? "yes" : "no") << "\n";
  if (from_journal)
    out << "journal     " << from_journal << " of these rows are in its journal, not yet in the file "
        << "(a running job's, or a stopped job's: resume it to commit them)\n";
  out << "errors      " << tally.errors << (tally.errors == 1 ? " row" : " rows") << "\n";
  for (const auto& e : tally.first_errors) out << "  " << e << "\n";
  if (tally.errors > static_cast<int64_t>(tally.first_errors.size()))
    out << "  ... and " << (tally.errors - static_cast<int64_t>(tally.first_errors.size())) << " more\n";
  out << "tokens      prompt " << tally.prompt_tokens << ", output " << tally.output_tokens << " (done rows)\n";
}

void inspect_once(const std::string& path, std::ostream& out) {
  ResultsReader f = ResultsReader::open_to_read(path);
  const RunInfo info = f.run_info();
  out << "results     " << path << "\n";
  out << "tpbatch     " << f.text_attribute("tpbatch_version", "?") << " (format " << f.int_attribute("format_version")
      << ")\n";
  out << "model       " << f.text_attribute("model", "?") << "\n";
  out << "task        " << f.text_attribute("task", "?") << "\n";
  if (const std::string job_id = f.job_id(); !job_id.empty()) out << "job id      " << job_id << "\n";
  out << "layout      world " << info.world_size << " = tensor " << info.tensor_parallel << " x pipeline "
      << info.pipeline_parallel << " x data " << info.data_parallel << "\n";
  const std::map<int64_t, RowResult> journal_rows = journal_rows_of(f, info.num_rows);
  const RowTally tally = tally_rows(f, journal_rows);
  print_rows(f, info, tally, journal_rows.size(), out);
  print_metrics(f, out);
  out << "finish      ";
  if (tally.reasons.empty()) out << "-";
  bool first = true;
  for (const auto& [r, c] : tally.reasons) {
    out << (first ? "" : ", ") << r << " " << c;
    first = false;
  }
  out << "\n";
}

}  // namespace

void inspect_results(const std::string& path, std::ostream& out) {
  // A running job may be replacing the file as it is read (its commit): such a read is tried again;
  // a file no job holds is read once.
  for (int attempt = 0;; ++attempt) {
    std::ostringstream text;
    const bool running = OutputLock::held_by_other(output_paths(path).journal);
    try {
      inspect_once(path, text);
    } catch (const Error&) {
      if (!running || attempt >= 20) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    out << text.str();
    if (running) out << "running     yes: a job is writing this file (figures as of its last flush)\n";
    return;
  }
}

}  // namespace tpbatch
