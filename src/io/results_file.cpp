// One open results file: datasets, attributes, rows. Layout: docs/results-file.md.
#include "io/results_file.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "common/version.h"
#include "io/finish_reason.h"
#include "io/input_row.h"
#include "io/output_paths.h"
#include "io/resume_check.h"
#include "reliability/model_fingerprint.h"

namespace tpbatch {

using namespace h5;

namespace {

constexpr const char* kJobIdAttribute = "job_id";

constexpr int64_t kFormatVersion = 1;
constexpr hsize_t kChunkRows = 1024;

// The job's chat_template key (a file), for messages; "" when it names none.
std::string chat_template_of(const std::string& job_yaml) {
  const std::string key = "\nchat_template: ";
  const size_t at = job_yaml.find(key);
  if (at == std::string::npos) return "";
  const size_t end = job_yaml.find('\n', at + key.size());
  return job_yaml.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

template <typename T>
hvl_t vl(const std::vector<T>& v) {
  return hvl_t{v.size(), v.empty() ? nullptr : const_cast<T*>(v.data())};
}

}  // namespace

OptionalDatasetSpec optional_spec_of(const RunInfo& info) {
  return OptionalDatasetSpec{info.embedding_dim, info.truncated_tokens, info.samples};
}

ResultsFile::ResultsFile(std::string name, OptionalDatasetSpec extra)
    : name_(std::move(name)), extra_(extra, name_) {}

ResultsFile ResultsFile::create(const std::string& file, const std::string& name, const RunInfo& info) {
  ResultsFile f(name, optional_spec_of(info));
  H5Handle fapl = file_access_plist();
  f.file_ = H5Handle(check(H5Fcreate(file.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), name, "cannot create the file"),
                     H5Fclose);
  f.writable_ = true;
  f.num_rows_ = info.num_rows;
  H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  hsize_t chunk = kChunkRows;
  H5Pset_chunk(dcpl, 1, &chunk);
  hsize_t dims = static_cast<hsize_t>(f.num_rows_), maxdims = H5S_UNLIMITED;
  H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
  for (int d = 0; d < kNumDs; ++d) f.create_dataset(d, space, dcpl);
  f.extra_.create(f.file_, f.num_rows_);
  write_attr(f.file_, "format_version", kFormatVersion, name);
  f.write_run_attrs(info);
  f.set_job_id(info.job_id.empty() ? new_random_id() : info.job_id);
  f.set_complete(false);
  f.set_writer_open(false);
  return f;
}

ResultsFile ResultsFile::open(const std::string& file, const std::string& name, bool writable) {
  ResultsFile f(name, OptionalDatasetSpec{});
  H5Handle fapl = file_access_plist();
  const hid_t id = H5Fopen(file.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl);
  if (id < 0) throw Error("results file '" + name + "': cannot open it (" + h5_detail() + ")");
  f.file_ = H5Handle(id, H5Fclose);
  f.writable_ = writable;
  return f;
}

std::string ResultsFile::resume_refusal(const RunInfo& info) {
  if (!has_attr(file_, "format_version")) return "it is not a tpbatch results file (no format_version attribute)";
  const int64_t fv = read_attr_int(file_, "format_version", name_);
  if (fv != kFormatVersion)
    return "its format_version is " + std::to_string(fv) + ", this tpbatch writes " + std::to_string(kFormatVersion);
  for (const char* a : {"model", "task", "num_rows", "job_yaml"})
    if (!has_attr(file_, a)) return std::string("it has no '") + a + "' attribute";
  for (int d = 0; d < kNumDs; ++d) {
    if (H5Lexists(file_, kDsNames[d], H5P_DEFAULT) <= 0) {
      if (added_later(d)) continue;  // a file from before the dataset existed: its rows have none
      return std::string("it has no dataset '/") + kDsNames[d] + "'";
    }
    const hid_t id = H5Dopen2(file_, kDsNames[d], H5P_DEFAULT);
    if (id < 0) return std::string("its dataset '/") + kDsNames[d] + "' cannot be opened (" + h5_detail() + ")";
    ds_[d] = H5Handle(id, H5Dclose);
  }
  const std::string model = read_attr_str(file_, "model", name_);
  const std::string task = read_attr_str(file_, "task", name_);
  const int64_t rows = read_attr_int(file_, "num_rows", name_);
  if (model != info.model && !same_file(model, info.model))
    return "it holds results of model '" + model + "', this job runs model '" + info.model + "'";
  if (task != info.task) return "it holds results of task '" + task + "', this job's task is '" + info.task + "'";
  const std::string diff = job_yaml_difference(read_attr_str(file_, "job_yaml", name_), info.job_yaml);
  if (!diff.empty()) return "it was written by a different job: " + diff;
  const RunInfo shard_there = shard_of_file();
  if (shard_there.shard.index != info.shard.index || shard_there.shard.count != info.shard.count)
    return "it holds " + describe_shard(shard_there) + ", this job runs " + describe_shard(info);
  // An input that grew by appended lines, its old lines byte for byte as they were: the file grows
  // with it and only the new lines are computed (incremental scoring of a growing data set).
  const std::string there =
      has_attr(file_, "input_fingerprint") ? read_attr_str(file_, "input_fingerprint", name_) : std::string();
  grow_to_ = 0;
  // Not a shard's: its lines would move with the input's length.
  if (!info.shard.sharded() && rows < info.num_rows && !there.empty() && !info.input_path.empty() &&
      there != info.input_fingerprint && input_grew_from(info.input_path, there))
    grow_to_ = info.num_rows;
  if (rows != info.num_rows && grow_to_ == 0)
    return "it holds " + std::to_string(rows) + " rows, this job's input has " + std::to_string(info.num_rows) +
           (there.empty() || rows > info.num_rows ? "" : " and its first lines are not those the file was computed from");
  if (!there.empty() && !info.input_fingerprint.empty() && there != info.input_fingerprint && grow_to_ == 0)
    return "its input file had fingerprint " + there + ", the input now has " + info.input_fingerprint +
           " (the input file changed)";
  if (has_attr(file_, "model_fingerprint") && !info.model_fingerprint.empty()) {
    const std::string diff =
        model_fingerprint_difference(read_attr_str(file_, "model_fingerprint", name_), info.model_fingerprint);
    if (!diff.empty())
      return "the model folder '" + info.model + "' changed since the file was started (" + diff +
             "): its rows would mix two models";
  }
  if (has_attr(file_, "chat_template_fingerprint") || !info.chat_template_fingerprint.empty()) {
    const std::string there =
        has_attr(file_, "chat_template_fingerprint") ? read_attr_str(file_, "chat_template_fingerprint", name_) : "";
    if (there != info.chat_template_fingerprint)
      return "the chat template changed since the file was started (its fingerprint was " +
             (there.empty() ? std::string("none") : there) + ", '" + chat_template_of(info.job_yaml) + "' now has " +
             (info.chat_template_fingerprint.empty() ? std::string("none") : info.chat_template_fingerprint) +
             "): its prompts would mix two templates";
  }
  num_rows_ = rows;
  for (int d = 0; d < kNumDs; ++d) {
    if (!ds_[d].valid()) continue;
    H5Handle sp(H5Dget_space(ds_[d]), H5Sclose);
    hsize_t n = 0;
    if (H5Sget_simple_extent_ndims(sp) != 1) return std::string("dataset '/") + kDsNames[d] + "' is not 1-D";
    H5Sget_simple_extent_dims(sp, &n, nullptr);
    if (static_cast<int64_t>(n) != num_rows_)
      return std::string("dataset '/") + kDsNames[d] + "' has " + std::to_string(n) + " rows, not " +
             std::to_string(num_rows_);
  }
  extra_ = OptionalDatasets(optional_spec_of(info), name_);
  if (std::string why = extra_.open(file_, num_rows_); !why.empty()) return why;
  if (writable_) {
    for (int d = 0; d < kNumDs; ++d) {
      if (ds_[d].valid()) continue;  // added_later(d): created now, rows empty
      H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
      hsize_t chunk = kChunkRows, dims = static_cast<hsize_t>(num_rows_), maxdims = H5S_UNLIMITED;
      H5Pset_chunk(dcpl, 1, &chunk);
      H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
      create_dataset(d, space, dcpl);
    }
  }
  return "";
}

std::vector<uint8_t> ResultsFile::read_done() {
  std::vector<uint8_t> done(static_cast<size_t>(num_rows_), 0);
  if (num_rows_ > 0)
    check(H5Dread(ds_[kDone], H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done.data()), name_,
          "cannot read dataset '/done'");
  for (auto& v : done) v = v ? 1 : 0;
  return done;
}

void ResultsFile::drop_unreadable_done_rows(std::vector<uint8_t>& done) {
  int64_t dropped = 0, first = -1;
  for (int64_t start = 0; start < num_rows_; start += static_cast<int64_t>(kChunkRows)) {
    const int64_t count = std::min<int64_t>(static_cast<int64_t>(kChunkRows), num_rows_ - start);
    if (std::none_of(done.begin() + start, done.begin() + start + count, [](uint8_t v) { return v; })) continue;
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
      uint8_t& d = done[static_cast<size_t>(start + i)];
      if (!d) continue;
      const char* f = ok ? fin[static_cast<size_t>(i)] : nullptr;
      const bool known = f && parse_finish_reason(f);
      if (!known) {
        d = 0;
        ++dropped;
        if (first < 0) first = start + i;
      }
    }
    H5Dvlen_reclaim(types_.str, mspace, H5P_DEFAULT, fin.data());
  }
  if (dropped)
    log_warning("results file '%s': %lld rows marked done do not read back (first: row %lld): "
                 "they are computed again",
                 name_.c_str(), static_cast<long long>(dropped), static_cast<long long>(first));
}

std::vector<RowResult> ResultsFile::read_rows(int64_t start, int64_t count) {
  const size_t n = static_cast<size_t>(count);
  hsize_t s = static_cast<hsize_t>(start), c = static_cast<hsize_t>(count);
  H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
  auto read = [&](int d, void* buf) {
    if (!ds_[d].valid()) return;  // added_later(d), absent from an older file: empty lists
    H5Handle fspace(H5Dget_space(ds_[d]), H5Sclose);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr);
    check(H5Dread(ds_[d], mem_type(types_, d), mspace, fspace, H5P_DEFAULT, buf), name_,
          std::string("cannot read dataset '/") + kDsNames[d] + "'");
  };
  std::vector<RowResult> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i].index = start + static_cast<int64_t>(i);
  std::vector<char*> strs(n, nullptr);
  auto strings = [&](int d, auto set) {
    read(d, strs.data());
    for (size_t i = 0; i < n; ++i) set(rows[i], strs[i] ? strs[i] : "");
    H5Dvlen_reclaim(types_.str, mspace, H5P_DEFAULT, strs.data());
    std::fill(strs.begin(), strs.end(), nullptr);
  };
  strings(kId, [](RowResult& r, const char* s) { r.id = s; });
  strings(kText, [](RowResult& r, const char* s) { r.output_text = s; });
  strings(kFinish, [](RowResult& r, const char* s) { r.finish_reason = parse_finish_reason(s); });
  strings(kError, [](RowResult& r, const char* s) { r.error = s; });
  std::vector<hvl_t> vls(n, hvl_t{0, nullptr});
  auto lists = [&](int d, auto field, hid_t mem) {
    using T = typename std::remove_reference_t<decltype(rows[0].*field)>::value_type;
    read(d, vls.data());
    for (size_t i = 0; i < n; ++i) {
      const auto* p = static_cast<const T*>(vls[i].p);
      (rows[i].*field).assign(p, p + vls[i].len);
    }
    H5Dvlen_reclaim(mem, mspace, H5P_DEFAULT, vls.data());
    std::fill(vls.begin(), vls.end(), hvl_t{0, nullptr});
  };
  lists(kPrompt, &RowResult::prompt_tokens, types_.vi32_mem);
  lists(kOutput, &RowResult::output_tokens, types_.vi32_mem);
  lists(kTopIds, &RowResult::top_logprob_tokens, types_.vi32_mem);
  lists(kTopLogprobs, &RowResult::top_logprobs, types_.vf32_mem);
  lists(kLogprobs, &RowResult::output_logprobs, types_.vf32_mem);
  std::vector<double> dbl(n);
  read(kLpSum, dbl.data());
  std::vector<uint8_t> u8(n);
  read(kGreedy, u8.data());
  for (size_t i = 0; i < n; ++i) rows[i].logprob_sum = dbl[i], rows[i].is_greedy = u8[i];
  extra_.read(start, count, rows);
  return rows;
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

RunInfo ResultsFile::shard_of_file() const {
  RunInfo info;
  if (!has_attr(file_, "shard_count")) return info;
  info.shard = Shard{read_attr_int(file_, "shard_index", name_), read_attr_int(file_, "shard_count", name_)};
  info.shard_lines = {read_attr_int(file_, "shard_first_line", name_), read_attr_int(file_, "shard_end_line", name_)};
  info.shard_rows = {read_attr_int(file_, "shard_first_row", name_), read_attr_int(file_, "shard_end_row", name_)};
  return info;
}

RunInfo ResultsFile::run_info() const {
  RunInfo info = shard_of_file();
  auto str = [&](const char* n) { return has_attr(file_, n) ? read_attr_str(file_, n, name_) : std::string(); };
  auto num = [&](const char* n) { return has_attr(file_, n) ? read_attr_int(file_, n, name_) : int64_t{0}; };
  info.model = str("model");
  info.task = str("task");
  info.job_yaml = str("job_yaml");
  info.world_size = num("world_size");
  info.tensor_parallel = num("tensor_parallel");
  info.pipeline_parallel = num("pipeline_parallel");
  info.data_parallel = num("data_parallel");
  info.num_rows = num("num_rows");
  info.input_fingerprint = str("input_fingerprint");
  info.model_fingerprint = str("model_fingerprint");
  info.chat_template_fingerprint = str("chat_template_fingerprint");
  const OptionalDatasetSpec extra = optional_datasets_in(file_);
  info.embedding_dim = extra.embedding_dim;
  info.truncated_tokens = extra.truncated_tokens;
  info.samples = extra.samples;
  return info;
}

std::string describe_shard(const RunInfo& info) {
  if (!info.shard.sharded()) return "the whole job (no shard)";
  return "shard " + std::to_string(info.shard.index) + " of " + std::to_string(info.shard.count) + " (input lines " +
         std::to_string(info.shard_lines.begin + 1) + " to " + std::to_string(info.shard_lines.end) + ")";
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

void ResultsFile::add_metric_totals_from(ResultsFile& other) {
  if (H5Lexists(other.file_, "metrics", H5P_DEFAULT) <= 0) return;
  H5Handle from(check(H5Gopen2(other.file_, "metrics", H5P_DEFAULT), name_, "cannot open group '/metrics'"), H5Gclose);
  H5Handle g = metrics_group();
  for (const char* n : {"wall_seconds"})
    if (has_attr(from, n))
      write_attr(g, n, read_attr_double(from, n, name_) + (has_attr(g, n) ? read_attr_double(g, n, name_) : 0.0), name_);
  for (const char* n : {"prompt_tokens", "prompt_tokens_cached", "output_tokens", "runs"})
    if (has_attr(from, n))
      write_attr(g, n, read_attr_int(from, n, name_) + (has_attr(g, n) ? read_attr_int(g, n, name_) : int64_t{0}), name_);
  // The rates over the totals, as add_run_metrics gives them after several runs.
  const double wall = has_attr(g, "wall_seconds") ? read_attr_double(g, "wall_seconds", name_) : 0.0;
  auto total = [&](const char* n) { return has_attr(g, n) ? static_cast<double>(read_attr_int(g, n, name_)) : 0.0; };
  write_attr(g, "output_tokens_per_second", wall > 0 ? total("output_tokens") / wall : 0.0, name_);
  write_attr(g, "total_tokens_per_second",
             wall > 0 ? (total("prompt_tokens") + total("output_tokens")) / wall : 0.0, name_);
}

std::string ResultsFile::commit_id() const {
  return has_attr(file_, "commit_id") ? read_attr_str(file_, "commit_id", name_) : "";
}
void ResultsFile::set_commit_id(const std::string& id) { write_attr(file_, "commit_id", id, types_, name_); }
std::string ResultsFile::job_id() const { return read_job_id(file_, name_); }
void ResultsFile::set_job_id(const std::string& id) { write_attr(file_, kJobIdAttribute, id, types_, name_); }

std::string read_job_id(hid_t file, const std::string& name) {
  return has_attr(file, kJobIdAttribute) ? read_attr_str(file, kJobIdAttribute, name) : "";
}

std::string new_random_id() {
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  char out[40];
  std::snprintf(out, sizeof out, "%016llx%016llx", static_cast<unsigned long long>(gen()),
                static_cast<unsigned long long>(gen()));
  return out;
}

bool ResultsFile::writer_open() const {
  return !has_attr(file_, "writer_open") || read_attr_int(file_, "writer_open", name_) != 0;
}
void ResultsFile::set_writer_open(bool open) { write_attr(file_, "writer_open", int64_t{open ? 1 : 0}, name_); }
void ResultsFile::set_complete(bool complete) { write_attr_u8(file_, "complete", complete ? 1 : 0, name_); }

void ResultsFile::close() {
  for (auto& d : ds_) d.reset();
  extra_.close();
  if (!file_.valid()) return;
  check(H5Fclose(file_.release()), name_, "cannot write the file (disk full?)");
}

void ResultsFile::create_dataset(int d, hid_t space, hid_t dcpl) {
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
