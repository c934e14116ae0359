// The results file: HDF5, serial, written by one rank. Layout: CONTRACT.md "Results file".
#include "io/result_writer.h"

#include <hdf5.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>

#include "common/error.h"
#include "common/version.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kFormatVersion = 1;
constexpr hsize_t kChunkRows = 1024;
constexpr size_t kBufferRows = 1024;
constexpr double kFlushSeconds = 5.0;

// ---- HDF5 plumbing -------------------------------------------------------------------------------

void quiet_hdf5() {
  static bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

herr_t walk_cb(unsigned n, const H5E_error2_t* err, void* data) {
  auto* s = static_cast<std::string*>(data);
  if (n == 0 && err && err->desc) *s = err->desc;
  return 0;
}

// The innermost message on HDF5's error stack (the most specific one), then clears the stack.
std::string h5_detail() {
  std::string s;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &s);
  H5Eclear2(H5E_DEFAULT);
  return s.empty() ? "HDF5 error" : s;
}

class H5Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  H5Handle() = default;
  H5Handle(hid_t id, Closer c) : id_(id), close_(c) {}
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
  H5Handle& operator=(H5Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_, close_ = o.close_;
      o.id_ = -1;
    }
    return *this;
  }
  ~H5Handle() { reset(); }
  void reset() {
    if (id_ >= 0 && close_) close_(id_);
    id_ = -1;
  }
  hid_t get() const { return id_; }
  hid_t release() {
    hid_t id = id_;
    id_ = -1;
    return id;
  }
  operator hid_t() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
  Closer close_ = nullptr;
};

// Throws Error "<file>: <what>: <hdf5 detail>" when id/status is negative.
hid_t check(hid_t id, const std::string& file, const std::string& what, int exit_code = kExitFailure) {
  if (id < 0) throw Error("results file '" + file + "': " + what + ": " + h5_detail(), exit_code);
  return id;
}

struct Types {
  H5Handle str, vi32_file, vi32_mem, vf32_file, vf32_mem;
  Types() {
    str = H5Handle(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(str, H5T_VARIABLE);
    H5Tset_cset(str, H5T_CSET_UTF8);
    vi32_file = H5Handle(H5Tvlen_create(H5T_STD_I32LE), H5Tclose);
    vi32_mem = H5Handle(H5Tvlen_create(H5T_NATIVE_INT32), H5Tclose);
    vf32_file = H5Handle(H5Tvlen_create(H5T_IEEE_F32LE), H5Tclose);
    vf32_mem = H5Handle(H5Tvlen_create(H5T_NATIVE_FLOAT), H5Tclose);
  }
};

enum Ds { kId, kDone, kPrompt, kOutput, kText, kLogprobs, kLpSum, kGreedy, kFinish, kError, kNumDs };
constexpr std::array<const char*, kNumDs> kDsNames = {"id",           "done",        "prompt_tokens", "output_tokens",
                                                      "output_text",  "output_logprobs", "logprob_sum", "is_greedy",
                                                      "finish_reason", "error"};

hid_t file_type(const Types& t, int d) {
  switch (d) {
    case kDone: case kGreedy: return H5T_STD_U8LE;
    case kPrompt: case kOutput: return t.vi32_file;
    case kLogprobs: return t.vf32_file;
    case kLpSum: return H5T_IEEE_F64LE;
    default: return t.str;
  }
}

hid_t mem_type(const Types& t, int d) {
  switch (d) {
    case kDone: case kGreedy: return H5T_NATIVE_UINT8;
    case kPrompt: case kOutput: return t.vi32_mem;
    case kLogprobs: return t.vf32_mem;
    case kLpSum: return H5T_NATIVE_DOUBLE;
    default: return t.str;
  }
}

H5Handle file_access_plist() {
  H5Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
#if H5_VERSION_GE(1, 10, 7)
  H5Pset_file_locking(fapl, true, true);  // lock, but work on file systems without locking
#endif
  return fapl;
}

// ---- attributes ------------------------------------------------------------------------------------

void delete_attr(hid_t loc, const char* name) {
  if (H5Aexists(loc, name) > 0) H5Adelete(loc, name);
}

void write_attr_raw(hid_t loc, const char* name, hid_t ftype, hid_t mtype, const void* v, const std::string& file) {
  delete_attr(loc, name);
  H5Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  H5Handle a(check(H5Acreate2(loc, name, ftype, space, H5P_DEFAULT, H5P_DEFAULT), file,
                   std::string("cannot create attribute '") + name + "'"),
             H5Aclose);
  check(H5Awrite(a, mtype, v), file, std::string("cannot write attribute '") + name + "'");
}

void write_attr(hid_t loc, const char* name, int64_t v, const std::string& file) {
  write_attr_raw(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v, file);
}
void write_attr(hid_t loc, const char* name, double v, const std::string& file) {
  write_attr_raw(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v, file);
}
void write_attr_u8(hid_t loc, const char* name, uint8_t v, const std::string& file) {
  write_attr_raw(loc, name, H5T_STD_U8LE, H5T_NATIVE_UINT8, &v, file);
}
void write_attr(hid_t loc, const char* name, const std::string& v, const Types& t, const std::string& file) {
  const char* p = v.c_str();
  write_attr_raw(loc, name, t.str, t.str, &p, file);
}

bool has_attr(hid_t loc, const char* name) { return H5Aexists(loc, name) > 0; }

std::string read_attr_str(hid_t loc, const char* name, const std::string& file) {
  H5Handle a(check(H5Aopen(loc, name, H5P_DEFAULT), file, std::string("no attribute '") + name + "'"), H5Aclose);
  H5Handle ft(H5Aget_type(a), H5Tclose);
  if (H5Tget_class(ft) != H5T_STRING) throw Error("results file '" + file + "': attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(ft) > 0) {
    H5Handle mt(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(mt, H5T_VARIABLE);
    H5Tset_cset(mt, H5Tget_cset(ft));
    char* p = nullptr;
    check(H5Aread(a, mt, &p), file, std::string("cannot read attribute '") + name + "'");
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(ft);
  std::string s(n, '\0');
  H5Handle mt(H5Tcopy(ft), H5Tclose);
  check(H5Aread(a, mt, s.data()), file, std::string("cannot read attribute '") + name + "'");
  s.resize(std::strlen(s.c_str()));
  return s;
}

int64_t read_attr_int(hid_t loc, const char* name, const std::string& file) {
  H5Handle a(check(H5Aopen(loc, name, H5P_DEFAULT), file, std::string("no attribute '") + name + "'"), H5Aclose);
  int64_t v = 0;
  check(H5Aread(a, H5T_NATIVE_INT64, &v), file, std::string("cannot read attribute '") + name + "'");
  return v;
}

double read_attr_double(hid_t loc, const char* name, const std::string& file) {
  H5Handle a(check(H5Aopen(loc, name, H5P_DEFAULT), file, std::string("no attribute '") + name + "'"), H5Aclose);
  double v = 0;
  check(H5Aread(a, H5T_NATIVE_DOUBLE, &v), file, std::string("cannot read attribute '") + name + "'");
  return v;
}

// ---- job_yaml comparison for resume ------------------------------------------------------------------

void flatten(const YAML::Node& n, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) flatten(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(), out);
  } else if (n.IsSequence()) {
    YAML::Emitter e;
    e << YAML::Flow << n;
    out[prefix] = e.c_str();
  } else if (n.IsScalar()) {
    out[prefix] = n.Scalar();
  } else {
    out[prefix] = "~";
  }
}

// Keys whose value may change between the first run and a resumed one: results do not depend on them.
bool resume_may_differ(const std::string& key) {
  return key.rfind("engine.", 0) == 0 || key.rfind("parallel.", 0) == 0 || key == "engine" || key == "parallel" ||
         key == "output.if_exists" || key == "output.path";
}

// "" when equivalent, else what differs.
std::string job_yaml_difference(const std::string& there, const std::string& here) {
  std::map<std::string, std::string> a, b;
  try {
    flatten(YAML::Load(there), "", a);
  } catch (const YAML::Exception&) {
    return "its job_yaml attribute is not valid YAML";
  }
  try {
    flatten(YAML::Load(here), "", b);
  } catch (const YAML::Exception&) {
    return "this job's YAML is not valid";
  }
  for (const auto& [k, v] : b) {
    if (resume_may_differ(k)) continue;
    auto it = a.find(k);
    if (it == a.end()) return "'" + k + "' is " + v + " here and absent there";
    if (it->second != v) return "'" + k + "' is " + it->second + " there and " + v + " here";
  }
  for (const auto& [k, v] : a)
    if (!resume_may_differ(k) && !b.count(k)) return "'" + k + "' is " + v + " there and absent here";
  return "";
}

// ---- strings -----------------------------------------------------------------------------------------

// Replaces invalid UTF-8 sequences with U+FFFD so every stored string is valid UTF-8.
void sanitize_utf8(std::string& s) {
  auto seq_len = [&](size_t i) -> size_t {  // length of a valid sequence at i, 0 if invalid
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return 1;
    size_t len;
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (i + len > s.size()) return 0;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (cc & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
      return 0;
    return len;
  };
  size_t i = 0;
  for (; i < s.size(); ++i) {
    size_t l = seq_len(i);
    if (l == 0) break;
    i += l - 1;
  }
  if (i >= s.size()) return;  // valid: the common case, no copy
  std::string out = s.substr(0, i);
  while (i < s.size()) {
    size_t l = seq_len(i);
    if (l == 0) {
      out += "\xEF\xBF\xBD";
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
  Hdf5ResultWriter(std::string path, const RunInfo& info) : path_(std::move(path)), info_(info) {}

  ~Hdf5ResultWriter() override {
    if (!finished_ && file_.valid()) {
      try {
        flush();
      } catch (...) {
      }
    }
  }

  void create() {
    std::error_code ec;
    fs::path parent = fs::path(path_).parent_path();
    if (!parent.empty()) fs::create_directories(parent, ec);
    H5Handle fapl = file_access_plist();
    file_ = H5Handle(check(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), path_, "cannot create the file"),
                     H5Fclose);
    num_rows_ = info_.num_rows;
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    hsize_t chunk = kChunkRows;
    H5Pset_chunk(dcpl, 1, &chunk);
    hsize_t dims = static_cast<hsize_t>(num_rows_), maxdims = H5S_UNLIMITED;
    H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
    for (int d = 0; d < kNumDs; ++d) {
      ds_[d] = H5Handle(check(H5Dcreate2(file_, kDsNames[d], file_type(types_, d), space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                              path_, std::string("cannot create dataset '/") + kDsNames[d] + "'"),
                        H5Dclose);
    }
    write_attr(file_, "format_version", kFormatVersion, path_);
    write_run_attrs();
    done_.assign(static_cast<size_t>(num_rows_), 0);
    check(H5Fflush(file_, H5F_SCOPE_LOCAL), path_, "cannot flush");
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
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, fapl);
    if (f < 0) refuse("it cannot be opened for writing (" + h5_detail() + ")");
    file_ = H5Handle(f, H5Fclose);
    if (!has_attr(file_, "format_version")) refuse("it is not a tpbatch results file (no format_version attribute)");
    int64_t fv = read_attr_int(file_, "format_version", path_);
    if (fv != kFormatVersion) refuse("its format_version is " + std::to_string(fv) + ", this tpbatch writes " +
                                     std::to_string(kFormatVersion));
    for (const char* a : {"model", "task", "num_rows", "job_yaml"})
      if (!has_attr(file_, a)) refuse(std::string("it has no '") + a + "' attribute");
    for (int d = 0; d < kNumDs; ++d) {
      if (H5Lexists(file_, kDsNames[d], H5P_DEFAULT) <= 0) refuse(std::string("it has no dataset '/") + kDsNames[d] + "'");
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
    num_rows_ = rows;
    for (int d = 0; d < kNumDs; ++d) {
      H5Handle sp(H5Dget_space(ds_[d]), H5Sclose);
      hsize_t n = 0;
      if (H5Sget_simple_extent_ndims(sp) != 1) refuse(std::string("dataset '/") + kDsNames[d] + "' is not 1-D");
      H5Sget_simple_extent_dims(sp, &n, nullptr);
      if (static_cast<int64_t>(n) != num_rows_)
        refuse(std::string("dataset '/") + kDsNames[d] + "' has " + std::to_string(n) + " rows, not " +
               std::to_string(num_rows_));
    }
    done_.assign(static_cast<size_t>(num_rows_), 0);
    if (num_rows_ > 0)
      check(H5Dread(ds_[kDone], H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, done_.data()), path_,
            "cannot read dataset '/done'");
    for (auto& v : done_) v = v ? 1 : 0;
    // This run's settings (layout, engine) replace the previous run's.
    write_attr(file_, "job_yaml", info_.job_yaml, types_, path_);
    write_run_attrs();
    check(H5Fflush(file_, H5F_SCOPE_LOCAL), path_, "cannot flush");
  }

  const std::vector<uint8_t>& done_rows() const override { return done_; }

  void write(RowResult row) override {
    if (finished_) throw Error("results file '" + path_ + "': write after finish");
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

  void flush() override {
    if (!file_.valid()) return;
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
      for (const auto& [start, rows] : runs) {  // `/done` only after the rows' data
        std::vector<uint8_t> ones(rows.size(), 1);
        write_slab(kDone, start, rows.size(), ones.data());
        std::fill(done_.begin() + start, done_.begin() + start + static_cast<int64_t>(rows.size()), 1);
      }
      buffer_.clear();
    }
    check(H5Fflush(file_, H5F_SCOPE_LOCAL), path_, "cannot flush");
    last_flush_ = std::chrono::steady_clock::now();
  }

  void finish(const RunMetrics& m) override {
    if (finished_) return;
    flush();
    H5Handle g;
    if (H5Lexists(file_, "metrics", H5P_DEFAULT) > 0)
      g = H5Handle(check(H5Gopen2(file_, "metrics", H5P_DEFAULT), path_, "cannot open group '/metrics'"), H5Gclose);
    else
      g = H5Handle(check(H5Gcreate2(file_, "metrics", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), path_,
                         "cannot create group '/metrics'"),
                   H5Gclose);
    write_attr(g, "wall_seconds", m.wall_seconds, path_);
    write_attr(g, "prompt_tokens", m.prompt_tokens, path_);
    write_attr(g, "output_tokens", m.output_tokens, path_);
    write_attr(g, "output_tokens_per_second", m.output_tokens_per_second, path_);
    write_attr(g, "total_tokens_per_second", m.total_tokens_per_second, path_);
    write_attr(g, "ttft_p50_seconds", m.ttft_p50, path_);
    write_attr(g, "ttft_p90_seconds", m.ttft_p90, path_);
    write_attr(g, "ttft_p99_seconds", m.ttft_p99, path_);
    write_attr(g, "tpot_p50_seconds", m.tpot_p50, path_);
    write_attr(g, "tpot_p90_seconds", m.tpot_p90, path_);
    write_attr(g, "tpot_p99_seconds", m.tpot_p99, path_);
    g.reset();
    bool complete = std::all_of(done_.begin(), done_.end(), [](uint8_t v) { return v != 0; });
    write_attr_u8(file_, "complete", complete ? 1 : 0, path_);
    check(H5Fflush(file_, H5F_SCOPE_LOCAL), path_, "cannot flush");
    for (auto& d : ds_) d.reset();
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
    write_attr_u8(file_, "complete", 0, path_);
  }

  void extend(int64_t rows) {
    hsize_t n = static_cast<hsize_t>(rows);
    for (int d = 0; d < kNumDs; ++d)
      check(H5Dset_extent(ds_[d], &n), path_, std::string("cannot extend dataset '/") + kDsNames[d] + "'");
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
    for (size_t i = 0; i < n; ++i) dbl[i] = rows[i]->logprob_sum;
    write_slab(kLpSum, start, n, dbl.data());
    for (size_t i = 0; i < n; ++i) u8[i] = rows[i]->is_greedy ? 1 : 0;
    write_slab(kGreedy, start, n, u8.data());
  }

  H5Handle file_;  // first: destroyed last
  std::array<H5Handle, kNumDs> ds_;
  Types types_;
  std::string path_;
  RunInfo info_;
  int64_t num_rows_ = 0;
  std::vector<uint8_t> done_;
  std::map<int64_t, RowResult> buffer_;
  std::chrono::steady_clock::time_point last_flush_ = std::chrono::steady_clock::now();
  bool finished_ = false;
};

// ---- inspect -------------------------------------------------------------------------------------------

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

}  // namespace

std::unique_ptr<ResultWriter> ResultWriter::open(const std::string& path, const std::string& if_exists,
                                                 const RunInfo& info) {
  quiet_hdf5();
  if (if_exists != "resume" && if_exists != "overwrite" && if_exists != "fail")
    throw JobError("'output.if_exists' must be one of resume, overwrite, fail, got \"" + if_exists + "\"");
  if (info.num_rows < 0) throw Error("results file '" + path + "': negative num_rows");
  std::error_code ec;
  bool exists = fs::exists(path, ec);
  if (exists && fs::is_directory(path, ec)) throw JobError("output '" + path + "' is a folder");
  if (exists && if_exists == "fail") throw JobError("output '" + path + "' exists (output.if_exists: fail)");
  auto w = std::make_unique<Hdf5ResultWriter>(path, info);
  if (exists && if_exists == "resume")
    w->reopen();
  else
    w->create();
  return w;
}

void inspect_results(const std::string& path, std::ostream& out) {
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
      if (!dn[i]) continue;
      ++done;
      prompt_tokens += static_cast<int64_t>(pl[i]);
      output_tokens += static_cast<int64_t>(ol[i]);
      reasons[fins[i].empty() ? "(none)" : fins[i]]++;
      if (!errs[i].empty()) {
        ++errors;
        if (first_errors.size() < 5) {
          if (ids.empty()) ids = read_strings(d_id, start, count, t, path, "id");
          first_errors.push_back("row " + std::to_string(start + i) + " (id " + ids[i] + "): " + errs[i]);
        }
      }
    }
  }
  out << "rows        " << done << " / " << num_rows << " done";
  if (num_rows > 0) out << " (" << fmt(100.0 * static_cast<double>(done) / static_cast<double>(num_rows), 1) << "%)";
  out << "\n";
  out << "complete    " << (int_attr("complete") ? "yes" : "no") << "\n";
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

}  // namespace tpbatch
