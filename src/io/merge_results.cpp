// `tpbatch merge`: a sharded job's parts joined into one results file (merge_results.h).
#include "io/merge_results.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "common/error.h"
#include "io/file_commit.h"
#include "io/output_lock.h"
#include "io/output_paths.h"
#include "io/result_writer.h"
#include "io/results_file.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kChunkRows = 1024;  // rows in memory at a time

// One part file. It is open only while it is checked or copied: every open file holds HDF5's chunk
// caches (a MiB per dataset), so memory would grow with the number of parts.
struct Part {
  std::string path;
  std::optional<ResultsReader> file;
  RunInfo info;
};

// The part's datasets, open for reading as a file of `job`'s (shard 0's run attributes); "" or why not.
std::string open_datasets(Part& p, const RunInfo& job) {
  RunInfo want = job;
  want.shard = p.info.shard;  // the part's own: what differs between parts
  if (!p.file) p.file.emplace(ResultsReader::open(p.path, p.path));
  return p.file->resume_refusal(want);
}

std::string in_quotes(const std::string& p) { return "'" + p + "'"; }

// A part, open for reading, with its run attributes; refused unless it is a shard's results file.
Part open_part(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw JobError("merge: part " + in_quotes(path) + " not found");
  if (fs::is_directory(path, ec)) throw JobError("merge: part " + in_quotes(path) + " is a folder");
  const htri_t is = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is <= 0) throw JobError("merge: part " + in_quotes(path) + " is not an HDF5 file");
  Part p;
  p.path = path;
  try {
    p.file.emplace(ResultsReader::open(path, path));
  } catch (const Error& e) {
    throw JobError(std::string("merge: ") + e.what());
  }
  if (const std::string why = p.file->format_refusal(); !why.empty())
    throw JobError("merge: part " + in_quotes(path) + " cannot be read: " + why);
  p.info = p.file->run_info();
  p.file.reset();
  if (!p.info.shard.sharded())
    throw JobError("merge: part " + in_quotes(path) + " is not a shard's results file (it has no shard_count "
                   "attribute: a job run without input.shard or --shard)");
  return p;
}

std::string index_list(const std::vector<int64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 10; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + (v.size() > 10 ? ", ..." : "");
}

// The parts by shard index, checked to be every shard of one sharding exactly once.
std::vector<Part> in_shard_order(std::vector<Part> parts) {
  const int64_t count = parts.front().info.shard.count;
  std::map<int64_t, size_t> by_index;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Shard& s = parts[i].info.shard;
    if (s.count != count)
      throw JobError("merge: part " + in_quotes(parts[i].path) + " is shard " + std::to_string(s.index) + " of " +
                     std::to_string(s.count) + ", part " + in_quotes(parts.front().path) + " one of " +
                     std::to_string(count) + ": the parts come from different shardings");
    auto [it, fresh] = by_index.emplace(s.index, i);
    if (!fresh)
      throw JobError("merge: shard " + std::to_string(s.index) + " of " + std::to_string(count) + " is given twice: " +
                     in_quotes(parts[it->second].path) + " and " + in_quotes(parts[i].path));
  }
  std::vector<int64_t> missing;
  for (int64_t i = 0; i < count; ++i)
    if (!by_index.count(i)) missing.push_back(i);
  if (!missing.empty())
    throw JobError("merge: " + std::string(missing.size() == 1 ? "shard " : "shards ") + index_list(missing) +
                   " of " + std::to_string(count) + (missing.size() == 1 ? " is" : " are") +
                   " missing (" + std::to_string(parts.size()) + " part" + (parts.size() == 1 ? "" : "s") +
                   " given): give every shard's results file");
  std::vector<Part> out;
  for (auto& [index, i] : by_index) out.push_back(std::move(parts[i]));
  return out;
}

// Every part of shard 0's job, their row ranges one after the other over all the job's rows, each
// with all its rows done.
void check_parts(std::vector<Part>& parts) {
  const Part& first = parts.front();
  int64_t next_row = 0, next_line = 0;
  for (Part& p : parts) {
    if (const std::string why = open_datasets(p, first.info); !why.empty())
      throw JobError("merge: part " + in_quotes(p.path) + " is not of the same job as " + in_quotes(first.path) +
                     ": " + why);
    if (p.info.shard_rows.begin != next_row || p.info.shard_lines.begin != next_line ||
        p.info.shard_rows.end < p.info.shard_rows.begin || p.info.shard_lines.end < p.info.shard_lines.begin)
      throw JobError("merge: part " + in_quotes(p.path) + ", " + describe_shard(p.info) +
                     ", does not start where the shard before it ends (input line " + std::to_string(next_line + 1) + "): its shard attributes " +
                     "were edited, or it was run on another input");
    next_row = p.info.shard_rows.end;
    next_line = p.info.shard_lines.end;
    const std::string missing = describe_missing_rows(p.file->read_done(), p.info.samples, p.info.shard_rows);
    if (!missing.empty())
      throw JobError("merge: part " + in_quotes(p.path) + ", " + describe_shard(p.info) +
                     ", is not finished: " + missing + "; rerun that shard (output.if_exists: resume) to compute them");
    p.file.reset();
  }
  if (next_row != first.info.num_rows)
    throw JobError("merge: the last part " + in_quotes(parts.back().path) + " ends at results row " +
                   std::to_string(next_row) + ", but the job has " + std::to_string(first.info.num_rows) + " rows");
}

}  // namespace

int merge_results(const MergeOptions& o, std::ostream& out) {
  h5::quiet_hdf5();
  if (o.parts.empty()) throw JobError("merge: no part files given");
  std::error_code ec;
  for (const std::string& p : o.parts)
    if (same_file(o.output, p))
      throw JobError("merge: the output " + in_quotes(o.output) + " is the part " + in_quotes(p) +
                     ", which merge reads: choose another output file");
  if (fs::is_directory(o.output, ec)) throw JobError("merge: the output " + in_quotes(o.output) + " is a folder");
  if (fs::exists(o.output, ec) && !o.force)
    throw JobError("merge: the output " + in_quotes(o.output) + " exists (--force replaces it)");

  std::vector<Part> parts;
  for (const std::string& p : o.parts) parts.push_back(open_part(p));
  parts = in_shard_order(std::move(parts));
  check_parts(parts);

  const OutputPaths paths = output_paths(o.output);
  fs::path parent = fs::path(paths.file).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  OutputLock lock = OutputLock::acquire(paths.journal, o.output);  // no job, and no other merge, writes OUT meanwhile
  const RunInfo job = parts.front().info;
  RunInfo merged = job;
  merged.shard = Shard{};
  merged.shard_lines = merged.shard_rows = IndexRange{};
  try {
    ResultsFile m = ResultsFile::create(paths.partial, o.output, merged);
    for (Part& p : parts) {
      if (const std::string why = open_datasets(p, job); !why.empty())  // it changed since it was checked
        throw Error("merge: part " + in_quotes(p.path) + " can no longer be read: " + why);
      for (int64_t start = p.info.shard_rows.begin; start < p.info.shard_rows.end; start += kChunkRows) {
        const int64_t n = std::min(kChunkRows, p.info.shard_rows.end - start);
        const std::vector<RowResult> rows = p.file->read_rows(start, n);
        std::vector<const RowResult*> ptrs;
        ptrs.reserve(rows.size());
        for (const RowResult& r : rows) ptrs.push_back(&r);
        m.write_rows(ptrs);
      }
      m.add_metric_totals_from(*p.file);
      // One job, one id: the first shard's (each shard's run made its own).
      if (const std::string id = p.file->job_id(); &p == &parts.front() && !id.empty()) m.set_job_id(id);
      p.file.reset();
    }
    m.set_complete(true);
    m.set_writer_open(false);
    m.set_commit_id(new_commit_id());
    m.close();
    commit_by_rename(paths.partial, paths.file, o.output);
  } catch (...) {
    fs::remove(paths.partial, ec);
    lock.remove_and_release();
    throw;
  }
  lock.remove_and_release();
  out << "merged " << parts.size() << " shards, " << merged.num_rows << " rows, into " << o.output << "\n";
  return kExitOk;
}

}  // namespace tpbatch
