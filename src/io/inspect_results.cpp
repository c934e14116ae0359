// `tpbatch inspect`: a summary of a results file. Read-only, and without HDF5's file lock, so it
// works on the file of a job that is still running: the file is its last commit, and the rows
// finished since are read from its journal (result_writer.h).
#include <hdf5.h>

#include <chrono>
#include <filesystem>
#include <thread>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "io/finish_reason.h"
#include "io/output_lock.h"
#include "io/output_paths.h"
#include "io/row_journal.h"
#include "io/result_writer.h"
#include "io/results_file.h"
#include "io/results_hdf5.h"

namespace tpbatch {
namespace {

using namespace h5;
namespace fs = std::filesystem;

// Reads rows [start, start+count) of a vlen-string dataset.
std::vector<std::string> read_strings(hid_t ds, hsize_t start, hsize_t count, const Types& t, const std::string& file,
                                      const char* name) {
  std::vector<char*> buf(count, nullptr);
  H5Handle fspace(H5Dget_space(ds), H5Sclose);
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  H5Handle mspace(H5Screate_simple(1, &count, nullptr), H5Sclose);
  check(H5Dread(ds, t.str, mspace, fspace, H5P_DEFAULT, buf.data()), file, std::string("cannot read dataset '/") + name + "'");
  std::vector<std::string> out(count);
  for (hsize_t i = 0; i < count; ++i) out[i] = buf[i] ? buf[i] : "";
  H5Dvlen_reclaim(t.str, mspace, H5P_DEFAULT, buf.data());
  return out;
}

std::vector<size_t> read_vlen_lengths(hid_t ds, hsize_t start, hsize_t count, const Types& t, const std::string& file,
                                      const char* name) {
  std::vector<hvl_t> buf(count, hvl_t{0, nullptr});
  H5Handle fspace(H5Dget_space(ds), H5Sclose);
  H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
  H5Handle mspace(H5Screate_simple(1, &count, nullptr), H5Sclose);
  check(H5Dread(ds, t.vi32_mem, mspace, fspace, H5P_DEFAULT, buf.data()), file,
        std::string("cannot read dataset '/") + name + "'");
  std::vector<size_t> out(count);
  for (hsize_t i = 0; i < count; ++i) out[i] = buf[i].len;
  H5Dvlen_reclaim(t.vi32_mem, mspace, H5P_DEFAULT, buf.data());
  return out;
}

std::string fmt(double v, int prec) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(prec) << v;
  return s.str();
}
void inspect_once(const std::string& path, std::ostream& out) {
  quiet_hdf5();
  std::error_code ec;
  if (!fs::exists(path, ec)) throw JobError("results file '" + path + "' not found");
  htri_t is = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is <= 0) throw JobError("'" + path + "' is not an HDF5 file");
  H5Handle fapl = file_access_plist();
  H5Handle f(check(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), path, "cannot open"), H5Fclose);
  if (!has_attr(f, "format_version")) throw JobError("'" + path + "' is not a tpbatch results file");
  Types t;
  auto str_attr = [&](const char* n) { return has_attr(f, n) ? read_attr_str(f, n, path) : std::string("?"); };
  auto int_attr = [&](const char* n) { return has_attr(f, n) ? read_attr_int(f, n, path) : int64_t{0}; };

  const int64_t num_rows = int_attr("num_rows");
  out << "results     " << path << "\n";
  out << "tpbatch     " << str_attr("tpbatch_version") << " (format " << int_attr("format_version") << ")\n";
  out << "model       " << str_attr("model") << "\n";
  out << "task        " << str_attr("task") << "\n";
  if (const std::string job_id = read_job_id(f, path); !job_id.empty()) out << "job id      " << job_id << "\n";
  out << "layout      world " << int_attr("world_size") << " = tensor " << int_attr("tensor_parallel") << " x pipeline "
      << int_attr("pipeline_parallel") << " x data " << int_attr("data_parallel") << "\n";

  auto open_ds = [&](const char* n) {
    return H5Handle(check(H5Dopen2(f, n, H5P_DEFAULT), path, std::string("no dataset '/") + n + "'"), H5Dclose);
  };
  H5Handle d_done = open_ds("done"), d_err = open_ds("error"), d_id = open_ds("id"), d_fin = open_ds("finish_reason"),
           d_pt = open_ds("prompt_tokens"), d_ot = open_ds("output_tokens");
  hsize_t n = 0;
  {
    H5Handle sp(H5Dget_space(d_done), H5Sclose);
    H5Sget_simple_extent_dims(sp, &n, nullptr);
  }
  int64_t done = 0, errors = 0, prompt_tokens = 0, output_tokens = 0;
  std::vector<std::string> first_errors;
  std::map<std::string, int64_t> reasons;
  auto count_row = [&](int64_t row, const std::string& id, const std::string& error, const std::string& finish,
                       size_t prompt, size_t output) {
    ++done;
    prompt_tokens += static_cast<int64_t>(prompt);
    output_tokens += static_cast<int64_t>(output);
    reasons[finish.empty() ? "(none)" : finish]++;
    if (error.empty()) return;
    ++errors;
    if (first_errors.size() >= 5) return;
    std::ostringstream line;  // (not string concatenation: GCC 12 warns falsely on it here)
    line << "row " << row << " (id " << id << "): " << error;
    first_errors.push_back(line.str());
  };
  // Rows finished since the file's last commit, from the journal extending it (a running job's, or
  // a stopped one's that a resume will replay).
  std::map<int64_t, RowResult> journal_rows;
  const std::string commit = has_attr(f, "commit_id") ? read_attr_str(f, "commit_id", path) : "";
  read_journal(output_paths(path).journal, path, commit, [&](RowResult&& r) {
    if (r.index >= 0 && r.index < num_rows) {
      r.output_logprobs.clear(), r.top_logprobs.clear(), r.top_logprob_tokens.clear(), r.embedding.clear();
      r.output_text.clear();
      journal_rows[r.index] = std::move(r);
    }
  });
  const hsize_t step = 65536;
  for (hsize_t start = 0; start < n; start += step) {
    hsize_t count = std::min(step, n - start);
    std::vector<uint8_t> dn(count);
    {
      H5Handle fs_(H5Dget_space(d_done), H5Sclose);
      H5Sselect_hyperslab(fs_, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
      H5Handle ms(H5Screate_simple(1, &count, nullptr), H5Sclose);
      check(H5Dread(d_done, H5T_NATIVE_UINT8, ms, fs_, H5P_DEFAULT, dn.data()), path, "cannot read dataset '/done'");
    }
    auto errs = read_strings(d_err, start, count, t, path, "error");
    auto fins = read_strings(d_fin, start, count, t, path, "finish_reason");
    auto pl = read_vlen_lengths(d_pt, start, count, t, path, "prompt_tokens");
    auto ol = read_vlen_lengths(d_ot, start, count, t, path, "output_tokens");
    std::vector<std::string> ids;
    for (hsize_t i = 0; i < count; ++i) {
      const int64_t row = static_cast<int64_t>(start + i);
      if (!dn[i] || journal_rows.count(row)) continue;
      if (!errs[i].empty() && ids.empty()) ids = read_strings(d_id, start, count, t, path, "id");
      count_row(row, ids.empty() ? "" : ids[i], errs[i], fins[i], pl[i], ol[i]);
    }
  }
  for (const auto& [row, r] : journal_rows)
    count_row(row, r.id, r.error, std::string(finish_reason_name(r.finish_reason)), r.prompt_tokens.size(), r.output_tokens.size());
  // A shard's file holds the job's every row but computes only its shard's.
  const bool sharded = int_attr("shard_count") > 1;
  const int64_t wanted = sharded ? int_attr("shard_end_row") - int_attr("shard_first_row") : num_rows;
  if (sharded)
    out << "shard       " << int_attr("shard_index") << " of " << int_attr("shard_count") << ": input lines "
        << int_attr("shard_first_line") + 1 << " to " << int_attr("shard_end_line") << ", results rows "
        << int_attr("shard_first_row") << " to " << int_attr("shard_end_row") - 1 << " of " << num_rows
        << " (tpbatch merge joins the shards' files)\n";
  out << "rows        " << done << " / " << wanted << " done" << (sharded ? " (of the shard)" : "");
  if (wanted > 0) out << " (" << fmt(100.0 * static_cast<double>(done) / static_cast<double>(wanted), 1) << "%)";
  out << "\n";
  out << "complete    " << (int_attr("complete") ? "yes" : "no") << "\n";
  if (!journal_rows.empty())
    out << "journal     " << journal_rows.size() << " of these rows are in its journal, not yet in the file "
        << "(a running job's, or a stopped job's: resume it to commit them)\n";
  out << "errors      " << errors << (errors == 1 ? " row" : " rows") << "\n";
  for (const auto& e : first_errors) out << "  " << e << "\n";
  if (errors > static_cast<int64_t>(first_errors.size()))
    out << "  ... and " << (errors - static_cast<int64_t>(first_errors.size())) << " more\n";
  out << "tokens      prompt " << prompt_tokens << ", output " << output_tokens << " (done rows)\n";
  if (H5Lexists(f, "metrics", H5P_DEFAULT) > 0) {
    H5Handle g(check(H5Gopen2(f, "metrics", H5P_DEFAULT), path, "cannot open group '/metrics'"), H5Gclose);
    auto d = [&](const char* name) { return has_attr(g, name) ? read_attr_double(g, name, path) : 0.0; };
    out << "wall        " << fmt(d("wall_seconds"), 2) << " s\n";
    out << "throughput  " << fmt(d("output_tokens_per_second"), 1) << " output tokens/s, "
        << fmt(d("total_tokens_per_second"), 1) << " total tokens/s\n";
    if (d("ttft_p50_seconds") > 0)
      out << "ttft        p50 " << fmt(d("ttft_p50_seconds"), 3) << " s, p90 " << fmt(d("ttft_p90_seconds"), 3)
          << " s, p99 " << fmt(d("ttft_p99_seconds"), 3) << " s\n";
    if (d("tpot_p50_seconds") > 0)
      out << "tpot        p50 " << fmt(d("tpot_p50_seconds") * 1e3, 2) << " ms, p90 "
          << fmt(d("tpot_p90_seconds") * 1e3, 2) << " ms, p99 " << fmt(d("tpot_p99_seconds") * 1e3, 2) << " ms\n";
  } else {
    out << "metrics     none yet (the run has not finished)\n";
  }
  out << "finish      ";
  if (reasons.empty()) out << "-";
  bool first = true;
  for (const auto& [r, c] : reasons) {
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
