// A results file opened for writing: creating it, its rows and attributes (results_file.h).
#include "io/results_file.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <random>

#include "common/error.h"
#include "common/version.h"
#include "io/finish_reason.h"

namespace tpbatch {

using namespace h5;

namespace {

constexpr hsize_t kChunkRows = 1024;

template <typename T>
hvl_t vl(const std::vector<T>& v) {
  return hvl_t{v.size(), v.empty() ? nullptr : const_cast<T*>(v.data())};
}

}  // namespace

ResultsFile::ResultsFile(std::string name, OptionalDatasetSpec extra) : ResultsReader(std::move(name)) {
  extra_ = OptionalDatasets(extra, name_);
}

ResultsFile ResultsFile::create(const std::string& file, const std::string& name, const RunInfo& info) {
  ResultsFile f(name, optional_spec_of(info));
  H5Handle fapl = file_access_plist();
  f.file_ = H5Handle(check(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), name, "cannot create the file"),
                     H5Fclose);
  f.num_rows_ = info.num_rows;
  for (int d = 0; d < kNumDs; ++d) f.create_dataset(d);
  f.extra_.create(f.file_, f.num_rows_);
  write_attr(f.file_, "format_version", kResultsFormatVersion, name);
  f.write_run_attrs(info);
  f.set_job_id(info.job_id.empty() ? new_random_id() : info.job_id);
  f.set_complete(false);
  f.set_writer_open(false);
  return f;
}

ResultsFile ResultsFile::open(const std::string& file, const std::string& name) {
  ResultsFile f(name, OptionalDatasetSpec{});
  H5Handle fapl = file_access_plist();
  const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDWR, fapl);
  if (id < 0) throw Error("results file '" + name + "': cannot open it (" + h5_detail() + ")");
  f.file_ = H5Handle(id, H5Fclose);
  return f;
}

void ResultsFile::bring_to_current_format() {
  for (int d = 0; d < kNumDs; ++d)
    if (!ds_[d].valid()) create_dataset(d);  // one an older format lacks: its rows empty
  if (job_id().empty()) set_job_id(new_random_id());
  write_attr(file_, "format_version", kResultsFormatVersion, name_);
}

void ResultsFile::write_rows(const std::vector<const RowResult*>& rows) {
  if (rows.empty()) return;
  const int64_t max_index = rows.back()->index;
  if (max_index >= num_rows_) extend(max_index + 1);
  // Contiguous runs of indices, each written with one hyperslab per dataset.
  size_t begin = 0;
  for (size_t i = 1; i <= rows.size(); ++i) {
    if (i < rows.size() && rows[i]->index == rows[i - 1]->index + 1) continue;
    const std::vector<const RowResult*> run(rows.begin() + static_cast<ptrdiff_t>(begin),
                                            rows.begin() + static_cast<ptrdiff_t>(i));
    write_run_data(run.front()->index, run);
    const std::vector<uint8_t> ones(run.size(), 1);
    write_slab(kDone, run.front()->index, run.size(), ones.data());
    begin = i;
  }
}

void ResultsFile::write_done(const std::vector<uint8_t>& done) {
  if (!done.empty()) write_slab(kDone, 0, done.size(), done.data());
}

void ResultsFile::write_run_attrs(const RunInfo& info) {
  write_attr(file_, "tpbatch_version", std::string(version()), types_, name_);
  write_attr(file_, "model", info.model, types_, name_);
  write_attr(file_, "task", info.task, types_, name_);
  write_attr(file_, "job_yaml", info.job_yaml, types_, name_);
  write_attr(file_, "world_size", info.world_size, name_);
  write_attr(file_, "tensor_parallel", info.tensor_parallel, name_);
  write_attr(file_, "pipeline_parallel", info.pipeline_parallel, name_);
  write_attr(file_, "data_parallel", info.data_parallel, name_);
  write_attr(file_, "num_rows", num_rows_, name_);
  if (!info.input_fingerprint.empty()) write_attr(file_, "input_fingerprint", info.input_fingerprint, types_, name_);
  if (!info.input_path.empty()) {  // where this run read its input: export finds it from anywhere
    std::error_code ec;
    const std::filesystem::path abs = std::filesystem::absolute(info.input_path, ec);
    if (!ec) write_attr(file_, "input_path", abs.lexically_normal().string(), types_, name_);
  }
  if (!info.model_fingerprint.empty()) write_attr(file_, "model_fingerprint", info.model_fingerprint, types_, name_);
  if (!info.chat_template_fingerprint.empty())
    write_attr(file_, "chat_template_fingerprint", info.chat_template_fingerprint, types_, name_);
  if (info.shard.sharded()) {
    write_attr(file_, "shard_index", info.shard.index, name_);
    write_attr(file_, "shard_count", info.shard.count, name_);
    write_attr(file_, "shard_first_line", info.shard_lines.begin, name_);
    write_attr(file_, "shard_end_line", info.shard_lines.end, name_);
    write_attr(file_, "shard_first_row", info.shard_rows.begin, name_);
    write_attr(file_, "shard_end_row", info.shard_rows.end, name_);
  }
}

H5Handle ResultsFile::metrics_group() {
  if (H5Lexists(file_, "metrics", H5P_DEFAULT) > 0)
    return H5Handle(check(H5Gopen2(file_, "metrics", H5P_DEFAULT), name_, "cannot open group '/metrics'"), H5Gclose);
  return H5Handle(check(H5Gcreate2(file_, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), name_,
                        "cannot create group '/metrics'"),
                  H5Gclose);
}

void ResultsFile::add_run_metrics(const RunMetrics& m) {
  H5Handle g = metrics_group();
  // Totals over every run that wrote this file (a resumed job's earlier runs included); the
  // percentiles and the last_run_* figures are this run's.
  auto prev_d = [&](const char* n) { return has_attr(g, n) ? read_attr_double(g, n, name_) : 0.0; };
  auto prev_i = [&](const char* n) { return has_attr(g, n) ? read_attr_int(g, n, name_) : int64_t{0}; };
  const double wall = prev_d("wall_seconds") + m.wall_seconds;
  const int64_t prompt = prev_i("prompt_tokens") + m.prompt_tokens;
  const int64_t output = prev_i("output_tokens") + m.output_tokens;
  const int64_t runs = prev_i("runs") + 1;
  write_attr(g, "runs", runs, name_);
  write_attr(g, "wall_seconds", wall, name_);
  write_attr(g, "prompt_tokens", prompt, name_);
  write_attr(g, "prompt_tokens_cached", prev_i("prompt_tokens_cached") + m.prompt_tokens_cached, name_);
  write_attr(g, "output_tokens", output, name_);
  const bool first_run = runs == 1;  // this run's own figures; totals over runs otherwise
  write_attr(g, "output_tokens_per_second",
             first_run ? m.output_tokens_per_second : wall > 0 ? static_cast<double>(output) / wall : 0.0, name_);
  write_attr(g, "total_tokens_per_second",
             first_run ? m.total_tokens_per_second : wall > 0 ? static_cast<double>(prompt + output) / wall : 0.0,
             name_);
  write_attr(g, "last_run_wall_seconds", m.wall_seconds, name_);
  write_attr(g, "last_run_prompt_tokens", m.prompt_tokens, name_);
  write_attr(g, "last_run_prompt_tokens_cached", m.prompt_tokens_cached, name_);
  write_attr(g, "last_run_output_tokens", m.output_tokens, name_);
  write_attr(g, "last_run_output_tokens_per_second", m.output_tokens_per_second, name_);
  write_attr(g, "ttft_p50_seconds", m.ttft_p50, name_);
  write_attr(g, "ttft_p90_seconds", m.ttft_p90, name_);
  write_attr(g, "ttft_p99_seconds", m.ttft_p99, name_);
  write_attr(g, "tpot_p50_seconds", m.tpot_p50, name_);
  write_attr(g, "tpot_p90_seconds", m.tpot_p90, name_);
  write_attr(g, "tpot_p99_seconds", m.tpot_p99, name_);
}

void ResultsFile::add_metric_totals_from(const ResultsReader& other) {
  if (!other.has_metrics()) return;
  H5Handle g = metrics_group();
  for (const char* n : {"wall_seconds"})
    if (const std::optional<double> v = other.metric(n))
      write_attr(g, n, *v + (has_attr(g, n) ? read_attr_double(g, n, name_) : 0.0), name_);
  for (const char* n : {"prompt_tokens", "prompt_tokens_cached", "output_tokens", "runs"})
    if (const std::optional<int64_t> v = other.metric_count(n))
      write_attr(g, n, *v + (has_attr(g, n) ? read_attr_int(g, n, name_) : int64_t{0}), name_);
  // The rates over the totals, as add_run_metrics gives them after several runs.
  const double wall = has_attr(g, "wall_seconds") ? read_attr_double(g, "wall_seconds", name_) : 0.0;
  auto total = [&](const char* n) { return has_attr(g, n) ? static_cast<double>(read_attr_int(g, n, name_)) : 0.0; };
  write_attr(g, "output_tokens_per_second", wall > 0 ? total("output_tokens") / wall : 0.0, name_);
  write_attr(g, "total_tokens_per_second",
             wall > 0 ? (total("prompt_tokens") + total("output_tokens")) / wall : 0.0, name_);
}

void ResultsFile::set_commit_id(const std::string& id) { write_attr(file_, "commit_id", id, types_, name_); }
void ResultsFile::set_job_id(const std::string& id) { write_attr(file_, "job_id", id, types_, name_); }

std::string new_random_id() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  char out[40];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(gen()),
                static_cast<unsigned long long>(gen()));
  return out;
}

void ResultsFile::set_writer_open(bool open) { write_attr(file_, "writer_open", int64_t{open ? 1 : 0}, name_); }
void ResultsFile::set_complete(bool complete) { write_attr_u8(file_, "complete", complete ? 1 : 0, name_); }

void ResultsFile::create_dataset(int d) {
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  hsize_t chunk = kChunkRows, dims = static_cast<hsize_t>(num_rows_), maxdims = H5S_UNLIMITED;
  H5Pset_chunk(dcpl, 1, &chunk);
  H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
  ds_[d] = H5Handle(check(H5Dcreate2(file_, kDsNames[d], file_type(types_, d), space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                          name_, std::string("cannot create dataset '/") + kDsNames[d] + "'"),
                    H5Dclose);
}

void ResultsFile::extend(int64_t rows) {
  hsize_t n = static_cast<hsize_t>(rows);
  for (int d = 0; d < kNumDs; ++d)
    check(H5Dset_extent(ds_[d], &n), name_, std::string("cannot extend dataset '/") + kDsNames[d] + "'");
  extra_.extend(rows);
  num_rows_ = rows;
  write_attr(file_, "num_rows", num_rows_, name_);
}

void ResultsFile::write_slab(int d, int64_t start, size_t count, const void* buf) {
  hsize_t s = static_cast<hsize_t>(start), c = count;
  H5Handle fspace(check(H5Dget_space(ds_[d]), name_, std::string("dataset '/") + kDsNames[d] + "'"), H5Sclose);
  check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr), name_,
        std::string("cannot select rows of dataset '/") + kDsNames[d] + "'");
  H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
  check(H5Dwrite(ds_[d], mem_type(types_, d), mspace, fspace, H5P_DEFAULT, buf), name_,
        std::string("cannot write rows ") + std::to_string(start) + ".." + std::to_string(start + count - 1) +
            " of dataset '/" + kDsNames[d] + "'");
}

void ResultsFile::write_run_data(int64_t start, const std::vector<const RowResult*>& rows) {
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
  strings(kReasoning, &RowResult::reasoning_text);
  for (size_t i = 0; i < n; ++i) strs[i] = finish_reason_name(rows[i]->finish_reason).data();  // literals: NUL-ended
  write_slab(kFinish, start, n, strs.data());
  strings(kError, &RowResult::error);
  auto lists = [&](int d, auto field) {
    for (size_t i = 0; i < n; ++i) vls[i] = vl(rows[i]->*field);
    write_slab(d, start, n, vls.data());
  };
  lists(kPrompt, &RowResult::prompt_tokens);
  lists(kOutput, &RowResult::output_tokens);
  lists(kLogprobs, &RowResult::output_logprobs);
  lists(kTopIds, &RowResult::top_logprob_tokens);
  lists(kTopLogprobs, &RowResult::top_logprobs);
  for (size_t i = 0; i < n; ++i) dbl[i] = rows[i]->logprob_sum;
  write_slab(kLpSum, start, n, dbl.data());
  for (size_t i = 0; i < n; ++i) u8[i] = rows[i]->is_greedy ? 1 : 0;
  write_slab(kGreedy, start, n, u8.data());
  extra_.write(start, rows);
}

}  // namespace tpbatch
