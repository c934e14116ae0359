// A results file opened for reading: its format, attributes, datasets and rows (results_reader.h).
#include "io/results_reader.h"

#include <algorithm>
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

// The format versions (root attribute format_version), oldest first:
//   1  files written before the version was counted: they may lack /top_logprob_tokens and
//      /top_logprobs (their rows read as having none; a resume creates them) and the job_id,
//      commit_id and writer_open attributes (read as absent).
//   2  every dataset and those attributes present but /reasoning_text (read as empty; a resume
//      creates it).
//   3  /reasoning_text added (kResultsFormatVersion).
// A version above kResultsFormatVersion was written by a newer tpbatch, whose changes this one
// cannot know how to read: refused, never guessed at.
constexpr int64_t kOldestReadableFormat = 1;

// Datasets a file of this format version may lack (docs/results-file.md).
bool may_lack(int64_t format_version, int d) { return format_version < format_adding(d); }

constexpr hsize_t kChunkRows = 1024;

// The job's chat_template key (a file), for messages; "" when it names none.
std::string chat_template_of(const std::string& job_yaml) {
  const std::string key = "\nchat_template: ";
  const size_t at = job_yaml.find(key);
  if (at == std::string::npos) return "";
  const size_t end = job_yaml.find('\n', at + key.size());
  return job_yaml.substr(at + key.size(), end == std::string::npos ? std::string::npos : end - at - key.size());
}

}  // namespace

OptionalDatasetSpec optional_spec_of(const RunInfo& info) {
  return OptionalDatasetSpec{info.embedding_dim, info.truncated_tokens, info.samples};
}

ResultsReader::ResultsReader(std::string name) : name_(std::move(name)), extra_(OptionalDatasetSpec{}, name_) {}

ResultsReader ResultsReader::open(const std::string& file, const std::string& name) {
  ResultsReader r(name);
  H5Handle fapl = file_access_plist();
  const hid_t id = H5Fopen(file.c_str(), H5F_ACC_RDONLY, fapl);
  if (id < 0) throw Error("results file '" + name + "': cannot open it (" + h5_detail() + ")");
  r.file_ = H5Handle(id, H5Fclose);
  return r;
}

ResultsReader ResultsReader::open_to_read(const std::string& path) {
  quiet_hdf5();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw JobError("results file '" + path + "' not found");
  const htri_t is = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is <= 0) throw JobError("'" + path + "' is not an HDF5 file");
  ResultsReader r = open(path, path);
  if (const std::string why = r.format_refusal(); !why.empty()) throw JobError("results file '" + path + "': " + why);
  if (const std::string why = r.open_datasets(); !why.empty()) throw Error("results file '" + path + "': " + why);
  return r;
}

std::string ResultsReader::format_refusal() const {
  if (!has_attr(file_, "format_version")) return "it is not a tpbatch results file (no format_version attribute)";
  const int64_t v = read_attr_int(file_, "format_version", name_);
  const std::string known = "format_version " + std::to_string(kOldestReadableFormat) + " to " +
                            std::to_string(kResultsFormatVersion);
  if (v > kResultsFormatVersion)
    return "its format_version is " + std::to_string(v) + ", newer than this tpbatch (" + std::string(version()) +
           ") reads (" + known + "): read it with the tpbatch that wrote it, or a newer one";
  if (v < kOldestReadableFormat)
    return "its format_version is " + std::to_string(v) + ", which no tpbatch writes (" + known + ")";
  return "";
}

std::string ResultsReader::open_datasets() {
  const int64_t format = read_attr_int(file_, "format_version", name_);
  for (int d = 0; d < kNumDs; ++d) {
    if (H5Lexists(file_, kDsNames[d], H5P_DEFAULT) <= 0) {
      if (may_lack(format, d)) continue;  // an older file: its rows have none
      return std::string("it has no dataset '/") + kDsNames[d] + "'";
    }
    const hid_t id = H5Dopen2(file_, kDsNames[d], H5P_DEFAULT);
    if (id < 0) return std::string("its dataset '/") + kDsNames[d] + "' cannot be opened (" + h5_detail() + ")";
    ds_[d] = H5Handle(id, H5Dclose);
  }
  for (int d = 0; d < kNumDs; ++d) {
    if (!ds_[d].valid()) continue;
    H5Handle sp(H5Dget_space(ds_[d]), H5Sclose);
    hsize_t n = 0;
    if (H5Sget_simple_extent_ndims(sp) != 1) return std::string("dataset '/") + kDsNames[d] + "' is not 1-D";
    H5Sget_simple_extent_dims(sp, &n, nullptr);
    if (d == kId) num_rows_ = static_cast<int64_t>(n);
    if (static_cast<int64_t>(n) != num_rows_)
      return std::string("dataset '/") + kDsNames[d] + "' has " + std::to_string(n) + " rows, not " +
             std::to_string(num_rows_);
  }
  extra_ = OptionalDatasets(optional_datasets_in(file_), name_);
  return extra_.open(file_, num_rows_);
}

std::string ResultsReader::resume_refusal(const RunInfo& info) {
  if (std::string why = format_refusal(); !why.empty()) return why;
  for (const char* a : {"model", "task", "num_rows", "job_yaml"})
    if (!has_attr(file_, a)) return std::string("it has no '") + a + "' attribute";
  if (std::string why = open_datasets(); !why.empty()) return why;
  if (std::string why = run_refusal(info); !why.empty()) return why;
  if (const int64_t rows = read_attr_int(file_, "num_rows", name_); rows != num_rows_)
    return "its datasets have " + std::to_string(num_rows_) + " rows, its num_rows attribute says " +
           std::to_string(rows);
  extra_ = OptionalDatasets(optional_spec_of(info), name_);  // those the job needs, refused when absent
  return extra_.open(file_, num_rows_);
}

// The attributes against info's: the same job, task, model, input, chat template and shard.
std::string ResultsReader::run_refusal(const RunInfo& info) {
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
  const std::string there = text_attribute("input_fingerprint");
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
    const std::string there = text_attribute("chat_template_fingerprint");
    if (there != info.chat_template_fingerprint)
      return "the chat template changed since the file was started (its fingerprint was " +
             (there.empty() ? std::string("none") : there) + ", '" + chat_template_of(info.job_yaml) + "' now has " +
             (info.chat_template_fingerprint.empty() ? std::string("none") : info.chat_template_fingerprint) +
             "): its prompts would mix two templates";
  }
  return "";
}

std::vector<uint8_t> ResultsReader::read_done(int64_t start, int64_t count) {
  std::vector<uint8_t> done(static_cast<size_t>(count), 0);
  if (count > 0) {
    hsize_t s = static_cast<hsize_t>(start), c = static_cast<hsize_t>(count);
    H5Handle fspace(H5Dget_space(ds_[kDone]), H5Sclose);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr);
    H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
    check(H5Dread(ds_[kDone], H5T_NATIVE_UINT8, mspace, fspace, H5P_DEFAULT, done.data()), name_,
          "cannot read dataset '/done'");
  }
  for (auto& v : done) v = v ? 1 : 0;
  return done;
}

void ResultsReader::drop_unreadable_done_rows(std::vector<uint8_t>& done) {
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

std::vector<RowResult> ResultsReader::read_rows(int64_t start, int64_t count) {
  const size_t n = static_cast<size_t>(count);
  hsize_t s = static_cast<hsize_t>(start), c = static_cast<hsize_t>(count);
  H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
  auto read = [&](int d, void* buf) {
    if (!ds_[d].valid()) return;  // added by a later format, absent from an older file: empty
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
  strings(kReasoning, [](RowResult& r, const char* s) { r.reasoning_text = s; });
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

RunInfo ResultsReader::shard_of_file() const {
  RunInfo info;
  if (!has_attr(file_, "shard_count")) return info;
  info.shard = Shard{read_attr_int(file_, "shard_index", name_), read_attr_int(file_, "shard_count", name_)};
  info.shard_lines = {read_attr_int(file_, "shard_first_line", name_), read_attr_int(file_, "shard_end_line", name_)};
  info.shard_rows = {read_attr_int(file_, "shard_first_row", name_), read_attr_int(file_, "shard_end_row", name_)};
  return info;
}

RunInfo ResultsReader::run_info() const {
  RunInfo info = shard_of_file();
  info.model = text_attribute("model");
  info.task = text_attribute("task");
  info.job_yaml = text_attribute("job_yaml");
  info.world_size = int_attribute("world_size");
  info.tensor_parallel = int_attribute("tensor_parallel");
  info.pipeline_parallel = int_attribute("pipeline_parallel");
  info.data_parallel = int_attribute("data_parallel");
  info.num_rows = int_attribute("num_rows");
  info.input_fingerprint = text_attribute("input_fingerprint");
  info.model_fingerprint = text_attribute("model_fingerprint");
  info.chat_template_fingerprint = text_attribute("chat_template_fingerprint");
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

std::string ResultsReader::text_attribute(const char* attr, const std::string& absent) const {
  return has_attr(file_, attr) ? read_attr_str(file_, attr, name_) : absent;
}
int64_t ResultsReader::int_attribute(const char* attr, int64_t absent) const {
  return has_attr(file_, attr) ? read_attr_int(file_, attr, name_) : absent;
}

bool ResultsReader::has_metrics() const { return H5Lexists(file_, "metrics", H5P_DEFAULT) > 0; }

std::optional<double> ResultsReader::metric(const char* attr) const {
  if (!has_metrics()) return std::nullopt;
  H5Handle g(check(H5Gopen2(file_, "metrics", H5P_DEFAULT), name_, "cannot open group '/metrics'"), H5Gclose);
  if (!has_attr(g, attr)) return std::nullopt;
  return read_attr_double(g, attr, name_);
}

std::optional<int64_t> ResultsReader::metric_count(const char* attr) const {
  if (!has_metrics()) return std::nullopt;
  H5Handle g(check(H5Gopen2(file_, "metrics", H5P_DEFAULT), name_, "cannot open group '/metrics'"), H5Gclose);
  if (!has_attr(g, attr)) return std::nullopt;
  return read_attr_int(g, attr, name_);
}

std::string ResultsReader::job_id() const { return text_attribute("job_id"); }
std::string ResultsReader::commit_id() const { return text_attribute("commit_id"); }
bool ResultsReader::writer_open() const { return int_attribute("writer_open", 1) != 0; }

void ResultsReader::close() {
  for (auto& d : ds_) d.reset();
  extra_.close();
  if (!file_.valid()) return;
  check(H5Fclose(file_.release()), name_, "cannot write the file (disk full?)");
}

}  // namespace tpbatch
