// The results file: HDF5, serial, written by one rank. Layout: CONTRACT.md "Results file".
#include "io/result_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/error.h"
#include "common/version.h"
#include "io/optional_datasets.h"
#include "io/output_lock.h"
#include "io/resume_check.h"
#include "io/results_hdf5.h"
#include "reliability/model_fingerprint.h"
#include "tokenizer/utf8.h"

namespace tpbatch {
namespace {

using namespace h5;
namespace fs = std::filesystem;

constexpr int64_t kFormatVersion = 1;
constexpr hsize_t kChunkRows = 1024;
constexpr size_t kBufferRows = 1024;
constexpr double kFlushSeconds = 5.0;

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

// ---- the writer ----------------------------------------------------------------------------------------

class Hdf5ResultWriter final : public ResultWriter {
 public:
  Hdf5ResultWriter(std::string path, const RunInfo& info, OutputLock lock)
      : lock_(std::move(lock)), path_(std::move(path)), info_(info), extra_(extra_spec(), path_) {}

  ~Hdf5ResultWriter() override {
    if (!finished_ && !failed_ && file_.valid()) {
      try {
        flush();
      } catch (...) {
      }
    }
  }

  void create() { create_at(path_); }

  // A new file at `file` (the output path, or the temporary a dirty file is rebuilt into).
  void create_at(const std::string& file) {
    H5Handle fapl = file_access_plist();
    file_ = H5Handle(check(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), path_, "cannot create the file"),
                     H5Fclose);
    num_rows_ = info_.num_rows;
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    hsize_t chunk = kChunkRows;
    H5Pset_chunk(dcpl, 1, &chunk);
    hsize_t dims = static_cast<hsize_t>(num_rows_), maxdims = H5S_UNLIMITED;
    H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
    for (int d = 0; d < kNumDs; ++d) create_dataset(d, space, dcpl);
    extra_.create(file_, num_rows_);
    write_attr(file_, "format_version", kFormatVersion, path_);
    write_run_attrs();
    done_.assign(static_cast<size_t>(num_rows_), 0);
    durable_flush();
  }

  void reopen() {
    auto refuse = [&](const std::string& why) {
      throw JobError("output '" + path_ + "' exists but cannot be resumed: " + why +
                     " (set output.if_exists: overwrite to replace it, or choose another output.path)");
    };
    htri_t is = H5Fis_hdf5(path_.c_str());
    H5Eclear2(H5E_DEFAULT);
    if (is <= 0) refuse("it is not an HDF5 file");
    H5Handle fapl = file_access_plist();
    // Read-only until it is known whether the last writer closed it: a file cut off mid-write
    // (kill -9, a full disk) is not written in place, whose HDF5 state may be half-updated.
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, fapl);
    if (f < 0) refuse("it cannot be opened (" + h5_detail() + ")");
    file_ = H5Handle(f, H5Fclose);
    if (!has_attr(file_, "format_version")) refuse("it is not a tpbatch results file (no format_version attribute)");
    int64_t fv = read_attr_int(file_, "format_version", path_);
    if (fv != kFormatVersion) refuse("its format_version is " + std::to_string(fv) + ", this tpbatch writes " +
                                     std::to_string(kFormatVersion));
    for (const char* a : {"model", "task", "num_rows", "job_yaml"})
      if (!has_attr(file_, a)) refuse(std::string("it has no '") + a + "' attribute");
    for (int d = 0; d < kNumDs; ++d) {
      if (H5Lexists(file_, kDsNames[d], H5P_DEFAULT) <= 0) {
        if (added_later(d)) continue;  // a file from before the dataset existed: its rows have none
        refuse(std::string("it has no dataset '/") + kDsNames[d] + "'");
      }
      ds_[d] = H5Handle(check(H5Dopen2(file_, kDsNames[d], H5P_DEFAULT), path_,
                              std::string("cannot open dataset '/") + kDsNames[d] + "'"),
                        H5Dclose);
    }
    std::string model = read_attr_str(file_, "model", path_);
    std::string task = read_attr_str(file_, "task", path_);
    int64_t rows = read_attr_int(file_, "num_rows", path_);
    std::string yaml = read_attr_str(file_, "job_yaml", path_);
    if (model != info_.model) refuse("it holds results of model '" + model + "', this job runs model '" + info_.model + "'");
    if (task != info_.task) refuse("it holds results of task '" + task + "', this job's task is '" + info_.task + "'");
    if (rows != info_.num_rows)
      refuse("it holds " + std::to_string(rows) + " rows, this job's input has " + std::to_string(info_.num_rows));
    std::string diff = job_yaml_difference(yaml, info_.job_yaml);
    if (!diff.empty()) refuse("it was written by a different job: " + diff);
    if (has_attr(file_, "input_fingerprint") && !info_.input_fingerprint.empty()) {
      const std::string there = read_attr_str(file_, "input_fingerprint", path_);
      if (there != info_.input_fingerprint)
        refuse("its input file had fingerprint " + there + ", the input now has " + info_.input_fingerprint +
               " (the input file changed)");
    }
    if (has_attr(file_, "model_fingerprint") && !info_.model_fingerprint.empty()) {
      const std::string diff =
          model_fingerprint_difference(read_attr_str(file_, "model_fingerprint", path_), info_.model_fingerprint);
      if (!diff.empty())
        refuse("the model folder '" + info_.model + "' changed since the file was started (" + diff +
               "): its rows would mix two models");
    }
    num_rows_ = rows;
    for (int d = 0; d < kNumDs; ++d) {
      if (!ds_[d].valid()) continue;
      H5Handle sp(H5Dget_space(ds_[d]), H5Sclose);
      hsize_t n = 0;
      if (H5Sget_simple_extent_ndims(sp) != 1) refuse(std::string("dataset '/") + kDsNames[d] + "' is not 1-D");
      H5Sget_simple_extent_dims(sp, &n, nullptr);
      if (static_cast<int64_t>(n) != num_rows_)
        refuse(std::string("dataset '/") + kDsNames[d] + "' has " + std::to_string(n) + " rows, not " +
               std::to_string(num_rows_));
    }
    if (const std::string why = extra_.open(file_, num_rows_); !why.empty()) refuse(why);
    done_.assign(static_cast<size_t>(num_rows_), 0);
    if (num_rows_ > 0)
      check(H5Dread(ds_[kDone], H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done_.data()), path_,
            "cannot read dataset '/done'");
    for (auto& v : done_) v = v ? 1 : 0;
    verify_done_rows();
    const bool cut_off = !has_attr(file_, "writer_open") || read_attr_int(file_, "writer_open", path_) != 0;
    if (cut_off) {
      rebuild();
    } else {  // closed cleanly: continue in place
      for (auto& d : ds_) d.reset();
      extra_.close();
      file_.reset();
      file_ = H5Handle(check(H5Fopen(path_.c_str(), H5F_ACC_RDWR, fapl), path_, "cannot open for writing"), H5Fclose);
      if (const std::string why = extra_.open(file_, num_rows_); !why.empty()) refuse(why);
      for (int d = 0; d < kNumDs; ++d) {
        if (H5Lexists(file_, kDsNames[d], H5P_DEFAULT) <= 0) {  // added_later(d): created now, rows empty
          H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
          hsize_t chunk = kChunkRows, dims = static_cast<hsize_t>(num_rows_), maxdims = H5S_UNLIMITED;
          H5Pset_chunk(dcpl, 1, &chunk);
          H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
          create_dataset(d, space, dcpl);
          continue;
        }
        ds_[d] = H5Handle(check(H5Dopen2(file_, kDsNames[d], H5P_DEFAULT), path_,
                                std::string("cannot open dataset '/") + kDsNames[d] + "'"),
                          H5Dclose);
      }
    }
    // This run's settings (layout, engine) replace the previous run's.
    write_attr(file_, "job_yaml", info_.job_yaml, types_, path_);
    write_run_attrs();
    durable_flush();
  }

  // The last writer did not close the file (killed, or its disk filled up): its done rows (all
  // verified) are copied into a new file, which then replaces it atomically. Rows written after
  // this point never share HDF5 structures with a half-written state.
  void rebuild() {
    const std::string tmp = path_ + ".resume-tmp";
    OutputLock old_lock = std::move(lock_);  // held until the copy replaced the old file
    lock_ = OutputLock::acquire(tmp);         // durable_flush() syncs the file being written
    H5Handle old_file = std::move(file_);
    std::array<H5Handle, kNumDs> old_ds;
    for (int d = 0; d < kNumDs; ++d) old_ds[d] = std::move(ds_[d]);
    OptionalDatasets old_extra = std::move(extra_);
    extra_ = OptionalDatasets(extra_spec(), path_);
    const std::vector<uint8_t> keep = done_;
    H5Handle old_metrics;
    if (H5Lexists(old_file, "metrics", H5P_DEFAULT) > 0)
      old_metrics = H5Handle(H5Gopen2(old_file, "metrics", H5P_DEFAULT), H5Gclose);
    create_at(tmp);
    if (old_metrics.valid()) copy_metrics(old_metrics);
    int64_t copied = 0;
    for (int64_t start = 0; start < num_rows_; start += static_cast<int64_t>(kChunkRows)) {
      const int64_t count = std::min<int64_t>(static_cast<int64_t>(kChunkRows), num_rows_ - start);
      if (std::none_of(keep.begin() + start, keep.begin() + start + count, [](uint8_t v) { return v; })) continue;
      std::vector<RowResult> old_rows = read_rows(old_ds, start, count);
      old_extra.read(start, count, old_rows);
      for (RowResult& r : old_rows)
        if (keep[static_cast<size_t>(r.index)]) buffer_[r.index] = std::move(r), ++copied;
      flush();
    }
    old_metrics.reset();
    old_extra.close();
    for (auto& d : old_ds) d.reset();
    old_file.reset();
    if (std::rename(tmp.c_str(), path_.c_str()) != 0)
      throw Error("results file '" + path_ + "': cannot replace it with its rebuilt copy '" + tmp + "': " +
                  std::strerror(errno));
    std::fprintf(stderr, "[tpbatch] results file '%s' was not closed by its last run: its %lld done rows were "
                 "copied into a fresh file\n", path_.c_str(), static_cast<long long>(copied));
  }

  // Rows [start, start + count) of an open results file, every field.
  std::vector<RowResult> read_rows(const std::array<H5Handle, kNumDs>& ds, int64_t start, int64_t count) {
    const size_t n = static_cast<size_t>(count);
    hsize_t s = static_cast<hsize_t>(start), c = static_cast<hsize_t>(count);
    H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
    auto read = [&](int d, void* buf) {
      if (!ds[d].valid()) return;  // added_later(d), absent from an older file: empty lists
      H5Handle fspace(H5Dget_space(ds[d]), H5Sclose);
      H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr);
      check(H5Dread(ds[d], mem_type(types_, d), mspace, fspace, H5P_DEFAULT, buf), path_,
            std::string("cannot read dataset '/") + kDsNames[d] + "'");
    };
    std::vector<RowResult> rows(n);
    for (size_t i = 0; i < n; ++i) rows[i].index = start + static_cast<int64_t>(i);
    std::vector<char*> strs(n, nullptr);
    auto strings = [&](int d, std::string RowResult::*field) {
      read(d, strs.data());
      for (size_t i = 0; i < n; ++i) rows[i].*field = strs[i] ? strs[i] : "";
      H5Dvlen_reclaim(types_.str, mspace, H5P_DEFAULT, strs.data());
      std::fill(strs.begin(), strs.end(), nullptr);
    };
    strings(kId, &RowResult::id);
    strings(kText, &RowResult::output_text);
    strings(kFinish, &RowResult::finish_reason);
    strings(kError, &RowResult::error);
    std::vector<hvl_t> vls(n, hvl_t{0, nullptr});
    auto ints = [&](int d, std::vector<int32_t> RowResult::*field) {
      read(d, vls.data());
      for (size_t i = 0; i < n; ++i) {
        const auto* p = static_cast<const int32_t*>(vls[i].p);
        (rows[i].*field).assign(p, p + vls[i].len);
      }
      H5Dvlen_reclaim(types_.vi32_mem, mspace, H5P_DEFAULT, vls.data());
      std::fill(vls.begin(), vls.end(), hvl_t{0, nullptr});
    };
    ints(kPrompt, &RowResult::prompt_tokens);
    ints(kOutput, &RowResult::output_tokens);
    ints(kTopIds, &RowResult::top_logprob_tokens);
    read(kTopLogprobs, vls.data());
    for (size_t i = 0; i < n; ++i) {
      const auto* p = static_cast<const float*>(vls[i].p);
      rows[i].top_logprobs.assign(p, p + vls[i].len);
    }
    H5Dvlen_reclaim(types_.vf32_mem, mspace, H5P_DEFAULT, vls.data());
    std::fill(vls.begin(), vls.end(), hvl_t{0, nullptr});
    read(kLogprobs, vls.data());
    for (size_t i = 0; i < n; ++i) {
      const auto* p = static_cast<const float*>(vls[i].p);
      rows[i].output_logprobs.assign(p, p + vls[i].len);
    }
    H5Dvlen_reclaim(types_.vf32_mem, mspace, H5P_DEFAULT, vls.data());
    std::vector<double> dbl(n);
    read(kLpSum, dbl.data());
    std::vector<uint8_t> u8(n);
    read(kGreedy, u8.data());
    for (size_t i = 0; i < n; ++i) rows[i].logprob_sum = dbl[i], rows[i].is_greedy = u8[i];
    return rows;
  }

  // The earlier runs' /metrics (totals), so that they stay cumulative across a rebuild.
  void copy_metrics(hid_t from) {
    H5Handle g(check(H5Gcreate2(file_, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path_,
                     "cannot create group '/metrics'"),
               H5Gclose);
    for (const char* n : {"wall_seconds"})
      if (has_attr(from, n)) write_attr(g, n, read_attr_double(from, n, path_), path_);
    for (const char* n : {"prompt_tokens", "prompt_tokens_cached", "output_tokens", "runs"})
      if (has_attr(from, n)) write_attr(g, n, read_attr_int(from, n, path_), path_);
  }

  const std::vector<uint8_t>& done_rows() const override { return done_; }

  void write(RowResult row) override {
    if (finished_) throw Error("results file '" + path_ + "': write after finish");
    if (failed_) throw Error("results file '" + path_ + "': write after a failed flush");
    if (row.index < 0) throw Error("results file '" + path_ + "': negative row index " + std::to_string(row.index));
    sanitize_utf8(row.id);
    sanitize_utf8(row.output_text);
    sanitize_utf8(row.finish_reason);
    sanitize_utf8(row.error);
    int64_t idx = row.index;
    buffer_[idx] = std::move(row);
    if (buffer_.size() >= kBufferRows ||
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_flush_).count() >= kFlushSeconds)
      flush();
  }

  // Durability order: the rows' data, then H5Fflush and fsync, and only then their `/done` flags,
  // flushed and synced again. A crash or a full disk at any point leaves every row marked done with
  // its data on the disk (HDF5 writes chunk data before its metadata cache, where the variable-length
  // data lives, so one flush for both could put `/done` on disk before the rows it vouches for).
  // After a failure the writer stops writing: rows not yet marked done are recomputed on resume.
  void flush() override {
    if (!file_.valid() || failed_) return;
    try {
      if (!buffer_.empty()) {
        int64_t max_index = buffer_.rbegin()->first;
        if (max_index >= num_rows_) extend(max_index + 1);
        // Contiguous runs of indices, each written with one hyperslab per dataset.
        std::vector<std::pair<int64_t, std::vector<const RowResult*>>> runs;
        for (const auto& [idx, r] : buffer_) {
          if (runs.empty() || runs.back().first + static_cast<int64_t>(runs.back().second.size()) != idx)
            runs.push_back({idx, {}});
          runs.back().second.push_back(&r);
        }
        for (const auto& [start, rows] : runs) write_run_data(start, rows);
        durable_flush();
        for (const auto& [start, rows] : runs) {
          std::vector<uint8_t> ones(rows.size(), 1);
          write_slab(kDone, start, rows.size(), ones.data());
        }
        durable_flush();
        for (const auto& [start, rows] : runs)
          std::fill(done_.begin() + start, done_.begin() + start + static_cast<int64_t>(rows.size()), 1);
        buffer_.clear();
      } else {
        durable_flush();
      }
    } catch (const Error&) {
      failed_ = true;
      throw;
    }
    last_flush_ = std::chrono::steady_clock::now();
  }

  void finish(const RunMetrics& m) override {
    if (finished_) return;
    if (failed_) throw Error("results file '" + path_ + "': not finished: an earlier write failed");
    flush();
    H5Handle g;
    if (H5Lexists(file_, "metrics", H5P_DEFAULT) > 0)
      g = H5Handle(check(H5Gopen2(file_, "metrics", H5P_DEFAULT), path_, "cannot open group '/metrics'"), H5Gclose);
    else
      g = H5Handle(check(H5Gcreate2(file_, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path_,
                         "cannot create group '/metrics'"),
                   H5Gclose);
    // Totals over every run that wrote this file (a resumed job's earlier runs included); the
    // percentiles and the last_run_* figures are this run's.
    auto prev_d = [&](const char* n) { return has_attr(g, n) ? read_attr_double(g, n, path_) : 0.0; };
    auto prev_i = [&](const char* n) { return has_attr(g, n) ? read_attr_int(g, n, path_) : int64_t{0}; };
    const double wall = prev_d("wall_seconds") + m.wall_seconds;
    const int64_t prompt = prev_i("prompt_tokens") + m.prompt_tokens;
    const int64_t output = prev_i("output_tokens") + m.output_tokens;
    const int64_t runs = prev_i("runs") + 1;
    write_attr(g, "runs", runs, path_);
    write_attr(g, "wall_seconds", wall, path_);
    write_attr(g, "prompt_tokens", prompt, path_);
    write_attr(g, "prompt_tokens_cached", prev_i("prompt_tokens_cached") + m.prompt_tokens_cached, path_);
    write_attr(g, "output_tokens", output, path_);
    const bool first_run = runs == 1;  // this run's own figures; totals over runs otherwise
    write_attr(g, "output_tokens_per_second",
               first_run ? m.output_tokens_per_second : wall > 0 ? static_cast<double>(output) / wall : 0.0, path_);
    write_attr(g, "total_tokens_per_second",
               first_run ? m.total_tokens_per_second : wall > 0 ? static_cast<double>(prompt + output) / wall : 0.0,
               path_);
    write_attr(g, "last_run_wall_seconds", m.wall_seconds, path_);
    write_attr(g, "last_run_prompt_tokens", m.prompt_tokens, path_);
    write_attr(g, "last_run_prompt_tokens_cached", m.prompt_tokens_cached, path_);
    write_attr(g, "last_run_output_tokens", m.output_tokens, path_);
    write_attr(g, "last_run_output_tokens_per_second", m.output_tokens_per_second, path_);
    write_attr(g, "ttft_p50_seconds", m.ttft_p50, path_);
    write_attr(g, "ttft_p90_seconds", m.ttft_p90, path_);
    write_attr(g, "ttft_p99_seconds", m.ttft_p99, path_);
    write_attr(g, "tpot_p50_seconds", m.tpot_p50, path_);
    write_attr(g, "tpot_p90_seconds", m.tpot_p90, path_);
    write_attr(g, "tpot_p99_seconds", m.tpot_p99, path_);
    g.reset();
    bool complete = std::all_of(done_.begin(), done_.end(), [](uint8_t v) { return v != 0; });
    write_attr_u8(file_, "complete", complete ? 1 : 0, path_);
    write_attr(file_, "writer_open", int64_t{0}, path_);  // closed cleanly: a resume continues in place
    durable_flush();
    for (auto& d : ds_) d.reset();
    extra_.close();
    herr_t rc = H5Fclose(file_.release());
    finished_ = true;
    check(rc, path_, "cannot close the file");
  }

 private:
  void write_run_attrs() {
    write_attr(file_, "tpbatch_version", std::string(version()), types_, path_);
    write_attr(file_, "model", info_.model, types_, path_);
    write_attr(file_, "task", info_.task, types_, path_);
    write_attr(file_, "job_yaml", info_.job_yaml, types_, path_);
    write_attr(file_, "world_size", info_.world_size, path_);
    write_attr(file_, "tensor_parallel", info_.tensor_parallel, path_);
    write_attr(file_, "pipeline_parallel", info_.pipeline_parallel, path_);
    write_attr(file_, "data_parallel", info_.data_parallel, path_);
    write_attr(file_, "num_rows", num_rows_, path_);
    if (!info_.input_fingerprint.empty()) write_attr(file_, "input_fingerprint", info_.input_fingerprint, types_, path_);
    if (!info_.model_fingerprint.empty()) write_attr(file_, "model_fingerprint", info_.model_fingerprint, types_, path_);
    write_attr_u8(file_, "complete", 0, path_);
    write_attr(file_, "writer_open", int64_t{1}, path_);  // until finish(): 1 means cut off mid-write
  }

  // H5Fflush, then fsync: what HDF5 wrote is on the disk. Throws Error naming the file and why.
  void durable_flush() {
    check(H5Fflush(file_, H5F_SCOPE_LOCAL), path_, "cannot write to the disk (disk full?)");
    if (const int err = lock_.sync())
      throw Error("results file '" + path_ + "': cannot write to the disk: " + std::strerror(err));
  }

  // Resume keeps only rows whose data reads back: a row marked done must have a readable
  // finish_reason that names how it ended (every written row has one). Others are recomputed.
  void verify_done_rows() {
    static const char* const kReasons[] = {"length", "eos", "stop", "scored", "embedded", "error"};
    int64_t dropped = 0, first = -1;
    for (int64_t start = 0; start < num_rows_; start += static_cast<int64_t>(kChunkRows)) {
      const int64_t count = std::min<int64_t>(static_cast<int64_t>(kChunkRows), num_rows_ - start);
      if (std::none_of(done_.begin() + start, done_.begin() + start + count, [](uint8_t v) { return v; })) continue;
      std::vector<char*> fin(static_cast<size_t>(count), nullptr);
      std::vector<hvl_t> toks(static_cast<size_t>(count), hvl_t{0, nullptr});
      hsize_t s = static_cast<hsize_t>(start), c = static_cast<hsize_t>(count);
      H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
      auto read = [&](int d, void* buf) {
        H5Handle fspace(H5Dget_space(ds_[d]), H5Sclose);
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr);
        const bool ok = H5Dread(ds_[d], mem_type(types_, d), mspace, fspace, H5P_DEFAULT, buf) >= 0;
        H5Eclear2(H5E_DEFAULT);
        return ok;
      };
      bool ok = read(kFinish, fin.data());
      if (ok) {  // the token lists must read back too (their heap objects reached the disk)
        for (int d : {kPrompt, kOutput}) {
          const bool read_ok = read(d, toks.data());
          if (read_ok) H5Dvlen_reclaim(types_.vi32_mem, mspace, H5P_DEFAULT, toks.data());
          std::fill(toks.begin(), toks.end(), hvl_t{0, nullptr});
          ok = ok && read_ok;
        }
      }
      for (int64_t i = 0; i < count; ++i) {
        uint8_t& d = done_[static_cast<size_t>(start + i)];
        if (!d) continue;
        const char* f = ok ? fin[static_cast<size_t>(i)] : nullptr;
        const bool known = f && std::any_of(std::begin(kReasons), std::end(kReasons),
                                            [&](const char* r) { return std::strcmp(f, r) == 0; });
        if (!known) {
          d = 0;
          ++dropped;
          if (first < 0) first = start + i;
        }
      }
      H5Dvlen_reclaim(types_.str, mspace, H5P_DEFAULT, fin.data());
    }
    if (dropped)
      std::fprintf(stderr,
                   "[tpbatch] warning: results file '%s': %lld rows marked done do not read back (first: row %lld; "
                   "an earlier run was cut off mid-write?): they are computed again\n",
                   path_.c_str(), static_cast<long long>(dropped), static_cast<long long>(first));
  }

  void create_dataset(int d, hid_t space, hid_t dcpl) {
    ds_[d] = H5Handle(check(H5Dcreate2(file_, kDsNames[d], file_type(types_, d), space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                            path_, std::string("cannot create dataset '/") + kDsNames[d] + "'"),
                      H5Dclose);
  }

  void extend(int64_t rows) {
    hsize_t n = static_cast<hsize_t>(rows);
    for (int d = 0; d < kNumDs; ++d)
      check(H5Dset_extent(ds_[d], &n), path_, std::string("cannot extend dataset '/") + kDsNames[d] + "'");
    extra_.extend(rows);
    num_rows_ = rows;
    done_.resize(static_cast<size_t>(rows), 0);
    write_attr(file_, "num_rows", num_rows_, path_);
  }

  void write_slab(int d, int64_t start, size_t count, const void* buf) {
    hsize_t s = static_cast<hsize_t>(start), c = count;
    H5Handle fspace(check(H5Dget_space(ds_[d]), path_, std::string("dataset '/") + kDsNames[d] + "'"), H5Sclose);
    check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr), path_,
          std::string("cannot select rows of dataset '/") + kDsNames[d] + "'");
    H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
    check(H5Dwrite(ds_[d], mem_type(types_, d), mspace, fspace, H5P_DEFAULT, buf), path_,
          std::string("cannot write rows ") + std::to_string(start) + ".." + std::to_string(start + count - 1) +
              " of dataset '/" + kDsNames[d] + "'");
  }

  template <typename T>
  static hvl_t vl(const std::vector<T>& v) {
    return hvl_t{v.size(), v.empty() ? nullptr : const_cast<T*>(v.data())};
  }

  void write_run_data(int64_t start, const std::vector<const RowResult*>& rows) {
    const size_t n = rows.size();
    std::vector<const char*> strs(n);
    std::vector<hvl_t> vls(n);
    std::vector<double> dbl(n);
    std::vector<uint8_t> u8(n);
    auto strings = [&](int d, auto field) {
      for (size_t i = 0; i < n; ++i) strs[i] = (rows[i]->*field).c_str();
      write_slab(d, start, n, strs.data());
    };
    strings(kId, &RowResult::id);
    strings(kText, &RowResult::output_text);
    strings(kFinish, &RowResult::finish_reason);
    strings(kError, &RowResult::error);
    for (size_t i = 0; i < n; ++i) vls[i] = vl(rows[i]->prompt_tokens);
    write_slab(kPrompt, start, n, vls.data());
    for (size_t i = 0; i < n; ++i) vls[i] = vl(rows[i]->output_tokens);
    write_slab(kOutput, start, n, vls.data());
    for (size_t i = 0; i < n; ++i) vls[i] = vl(rows[i]->output_logprobs);
    write_slab(kLogprobs, start, n, vls.data());
    for (size_t i = 0; i < n; ++i) vls[i] = vl(rows[i]->top_logprob_tokens);
    write_slab(kTopIds, start, n, vls.data());
    for (size_t i = 0; i < n; ++i) vls[i] = vl(rows[i]->top_logprobs);
    write_slab(kTopLogprobs, start, n, vls.data());
    for (size_t i = 0; i < n; ++i) dbl[i] = rows[i]->logprob_sum;
    write_slab(kLpSum, start, n, dbl.data());
    for (size_t i = 0; i < n; ++i) u8[i] = rows[i]->is_greedy ? 1 : 0;
    write_slab(kGreedy, start, n, u8.data());
    extra_.write(start, rows);
  }

  OptionalDatasetSpec extra_spec() const {
    return OptionalDatasetSpec{info_.embedding_dim, info_.truncated_tokens, info_.samples};
  }

  OutputLock lock_;  // first: released after the file is closed
  H5Handle file_;
  std::array<H5Handle, kNumDs> ds_;
  Types types_;
  std::string path_;
  RunInfo info_;
  OptionalDatasets extra_;  // /embedding, /truncated_tokens when the job has them
  int64_t num_rows_ = 0;
  std::vector<uint8_t> done_;
  std::map<int64_t, RowResult> buffer_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  bool finished_ = false;
  bool failed_ = false;   // a flush failed: nothing more is written
};

}  // namespace

std::string describe_missing_rows(const std::vector<uint8_t>& done, bool samples) {
  int64_t missing = 0;
  std::string list;
  for (size_t i = 0; i < done.size(); ++i) {
    if (done[i]) continue;
    if (++missing <= 10) list += (list.empty() ? "" : ", ") + std::to_string(samples ? i : i + 1);
  }
  if (!missing) return "";
  const std::string what = samples ? " results row" : " input line";  // lines with n > 1 have several rows
  return std::to_string(missing) + (missing == 1 ? " row is" : " rows are") + " missing:" + what +
         (missing == 1 ? " " : "s ") + list + (missing > 10 ? ", ..." : "");
}

std::unique_ptr<ResultWriter> ResultWriter::open(const std::string& path, IfExists if_exists,
                                                 const RunInfo& info) {
  quiet_hdf5();
  if (info.num_rows < 0) throw Error("results file '" + path + "': negative num_rows");
  std::error_code ec;
  bool exists = fs::exists(path, ec);
  if (exists && fs::is_directory(path, ec)) throw JobError("output '" + path + "' is a folder");
  if (exists && if_exists == IfExists::kFail) throw JobError("output '" + path + "' exists (output.if_exists: fail)");
  fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  // Locked before anything touches the file: a job running on this output keeps its rows.
  OutputLock lock = OutputLock::acquire(path);
  auto w = std::make_unique<Hdf5ResultWriter>(path, info, std::move(lock));
  if (exists && if_exists == IfExists::kResume)
    w->reopen();
  else
    w->create();
  return w;
}


}  // namespace tpbatch
