// The HDF5 results file: layout, round trip, if_exists, resume, finish, inspect.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <functional>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "common/version.h"
#include "io/inspect_results.h"
#include "io/result_writer.h"
#include "io/results_reader.h"
#include "reliability/model_fingerprint.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

const char* const kDatasets[] = {"id",          "done",         "prompt_tokens", "output_tokens", "output_text",
                                 "output_logprobs", "logprob_sum", "is_greedy",    "finish_reason", "error",
                                 // docs/results-file.md: every generate row may ask for top_logprobs
                                 "top_logprob_tokens", "top_logprobs",
                                 // the job key reasoning (empty strings when it is none)
                                 "reasoning_text"};

// ---- reading back with the HDF5 C API ----
hid_t no_locking() {
  static hid_t fapl = [] {
    hid_t p = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(p, false, true);
    return p;
  }();
  return fapl;
}

struct File {
  hid_t id;
  // Without HDF5's file locking, as the writer opens it (it holds its own lock): HDF5 refuses to
  // open a file twice in one process with different locking settings.
  explicit File(const std::string& p) : id(H5Fopen(p.c_str(), H5F_ACC_RDONLY, no_locking())) {
    EXPECT_GE(id, 0) << p;
  }
  ~File() {
    if (id >= 0) H5Fclose(id);
  }
};

hsize_t rows_of(hid_t f, const char* name) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  hid_t s = H5Dget_space(d);
  hsize_t n = 0, max = 0;
  H5Sget_simple_extent_dims(s, &n, &max);
  H5Sclose(s);
  H5Dclose(d);
  return n;
}

std::vector<std::string> read_strings(hid_t f, const char* name) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  std::vector<char*> buf(rows_of(f, name));
  std::vector<std::string> out;
  if (!buf.empty()) {
    EXPECT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
    for (char* p : buf) out.push_back(p ? p : "");
    hid_t s = H5Dget_space(d);
    H5Dvlen_reclaim(t, s, H5P_DEFAULT, buf.data());
    H5Sclose(s);
  }
  H5Tclose(t);
  H5Dclose(d);
  return out;
}

template <typename T>
std::vector<std::vector<T>> read_vlen(hid_t f, const char* name, hid_t native) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  hid_t t = H5Tvlen_create(native);
  std::vector<hvl_t> buf(rows_of(f, name));
  std::vector<std::vector<T>> out;
  if (!buf.empty()) {
    EXPECT_GE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()), 0);
    for (const auto& v : buf) out.emplace_back(static_cast<T*>(v.p), static_cast<T*>(v.p) + v.len);
    hid_t s = H5Dget_space(d);
    H5Dvlen_reclaim(t, s, H5P_DEFAULT, buf.data());
    H5Sclose(s);
  }
  H5Tclose(t);
  H5Dclose(d);
  return out;
}

template <typename T>
std::vector<T> read_fixed(hid_t f, const char* name, hid_t native) {
  hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
  std::vector<T> out(rows_of(f, name));
  if (!out.empty()) EXPECT_GE(H5Dread(d, native, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  H5Dclose(d);
  return out;
}

std::string str_attr(hid_t loc, const char* name) {
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  EXPECT_GE(a, 0) << name;
  hid_t ft = H5Aget_type(a);
  EXPECT_EQ(H5Tget_cset(ft), H5T_CSET_UTF8) << name;
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  char* p = nullptr;
  H5Aread(a, t, &p);
  std::string s = p ? p : "";
  H5free_memory(p);
  H5Tclose(t);
  H5Tclose(ft);
  H5Aclose(a);
  return s;
}

int64_t int_attr(hid_t loc, const char* name) {
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  EXPECT_GE(a, 0) << name;
  int64_t v = -1;
  H5Aread(a, H5T_NATIVE_INT64, &v);
  H5Aclose(a);
  return v;
}

double double_attr(hid_t loc, const char* name) {
  hid_t a = H5Aopen(loc, name, H5P_DEFAULT);
  EXPECT_GE(a, 0) << name;
  double v = -1;
  H5Aread(a, H5T_NATIVE_DOUBLE, &v);
  H5Aclose(a);
  return v;
}

RunInfo info(int64_t rows) {
  RunInfo i;
  i.model = "models/tiny";
  i.task = "generate";
  i.job_yaml = "model: models/tiny\ntask: generate\nsampling:\n  temperature: 0.0\nengine:\n  max_seqs: 64\n"
               "parallel:\n  tensor: 2\noutput:\n  if_exists: resume\n";
  i.world_size = 4;
  i.tensor_parallel = 2;
  i.pipeline_parallel = 1;
  i.data_parallel = 2;
  i.num_rows = rows;
  return i;
}

RowResult row(int64_t i) {
  RowResult r;
  r.index = i;
  r.id = "id-" + std::to_string(i);
  r.prompt_tokens = {1, static_cast<int32_t>(i)};
  r.output_tokens.assign(static_cast<size_t>(i % 4), 7);
  r.output_text = "text " + std::to_string(i) + " \xC3\xA9";
  r.output_logprobs.assign(r.output_tokens.size(), -0.5f);
  r.logprob_sum = -0.5 * static_cast<double>(r.output_tokens.size());
  r.is_greedy = i % 2;
  r.finish_reason = i % 3 == 0 ? FinishReason::kEos : FinishReason::kLength;
  return r;
}

class ResultWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* ti = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("tpbatch_h5_" + std::string(ti->name()) + "_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "results.h5").string();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string error_of_open(IfExists if_exists, const RunInfo& i) {
    try {
      ResultWriter::open(path_, if_exists, i);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "open succeeded";
    return "";
  }
  // Runs `job` in a child process that SIGKILLs itself when the job returns: nothing after it runs
  // (no destructor, no flush), and its lock goes with it, as with kill -9.
  void killed_after(const std::function<void()>& job) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        job();
      } catch (...) {
        ::_exit(3);
      }
      ::raise(SIGKILL);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child failed before its kill";
  }
  void write_rows(const std::vector<int64_t>& which, int64_t total, bool finish) {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(total));
    for (int64_t i : which) w->write(row(i));
    if (finish) w->finish(RunMetrics{});
  }
  fs::path dir_;
  std::string path_;
};

}  // namespace

TEST_F(ResultWriterTest, RoundTripRowsWrittenOutOfOrder) {
  const int64_t n = 7;
  {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(n));
    EXPECT_EQ(w->done_rows(), std::vector<uint8_t>(n, 0));
    for (int64_t i : {3, 0, 6}) w->write(row(i));
    w->flush();
    for (int64_t i : {5, 1, 4, 2}) w->write(row(i));
    w->finish(RunMetrics{});
  }
  File f(path_);
  auto ids = read_strings(f.id, "id");
  auto texts = read_strings(f.id, "output_text");
  auto reasons = read_strings(f.id, "finish_reason");
  auto errors = read_strings(f.id, "error");
  auto prompt = read_vlen<int32_t>(f.id, "prompt_tokens", H5T_NATIVE_INT32);
  auto output = read_vlen<int32_t>(f.id, "output_tokens", H5T_NATIVE_INT32);
  auto lps = read_vlen<float>(f.id, "output_logprobs", H5T_NATIVE_FLOAT);
  auto sums = read_fixed<double>(f.id, "logprob_sum", H5T_NATIVE_DOUBLE);
  auto greedy = read_fixed<uint8_t>(f.id, "is_greedy", H5T_NATIVE_UINT8);
  auto done = read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8);
  ASSERT_EQ(ids.size(), static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    RowResult e = row(i);
    EXPECT_EQ(ids[i], e.id);
    EXPECT_EQ(texts[i], e.output_text);
    EXPECT_EQ(reasons[i], finish_reason_name(e.finish_reason));
    EXPECT_EQ(errors[i], "");
    EXPECT_EQ(prompt[i], e.prompt_tokens);
    EXPECT_EQ(output[i], e.output_tokens);
    EXPECT_EQ(lps[i], e.output_logprobs);
    EXPECT_EQ(sums[i], e.logprob_sum);
    EXPECT_EQ(greedy[i], e.is_greedy);
    EXPECT_EQ(done[i], 1);
  }
  EXPECT_EQ(int_attr(f.id, "format_version"), kResultsFormatVersion);
  EXPECT_EQ(str_attr(f.id, "tpbatch_version"), version());
  EXPECT_EQ(str_attr(f.id, "model"), "models/tiny");
  EXPECT_EQ(str_attr(f.id, "task"), "generate");
  EXPECT_EQ(str_attr(f.id, "job_yaml"), info(n).job_yaml);
  EXPECT_EQ(int_attr(f.id, "world_size"), 4);
  EXPECT_EQ(int_attr(f.id, "tensor_parallel"), 2);
  EXPECT_EQ(int_attr(f.id, "pipeline_parallel"), 1);
  EXPECT_EQ(int_attr(f.id, "data_parallel"), 2);
  EXPECT_EQ(int_attr(f.id, "num_rows"), n);
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
}

TEST_F(ResultWriterTest, DatasetsAreExactlyTheContractsChunkedExtendible1D) {
  write_rows({0, 1}, 3, false);
  File f(path_);
  H5G_info_t gi;
  H5Gget_info(f.id, &gi);
  EXPECT_EQ(gi.nlinks, 13u);  // the ten datasets, the two top-logprob ones, /reasoning_text; /metrics only after finish
  for (const char* name : kDatasets) {
    hid_t d = H5Dopen2(f.id, name, H5P_DEFAULT);
    ASSERT_GE(d, 0) << name;
    hid_t s = H5Dget_space(d);
    EXPECT_EQ(H5Sget_simple_extent_ndims(s), 1) << name;
    hsize_t n = 0, max = 0;
    H5Sget_simple_extent_dims(s, &n, &max);
    EXPECT_EQ(n, 3u) << name;
    EXPECT_EQ(max, H5S_UNLIMITED) << name;
    hid_t p = H5Dget_create_plist(d);
    EXPECT_EQ(H5Pget_layout(p), H5D_CHUNKED) << name;
    H5Pclose(p);
    H5Sclose(s);
    H5Dclose(d);
  }
}

TEST_F(ResultWriterTest, DatasetTypesMatchContract) {
  write_rows({0}, 1, true);
  File f(path_);
  auto type_of = [&](const char* name) {
    hid_t d = H5Dopen2(f.id, name, H5P_DEFAULT);
    hid_t t = H5Dget_type(d);
    H5Dclose(d);
    return t;
  };
  for (const char* name : {"id", "output_text", "finish_reason", "error", "reasoning_text"}) {
    hid_t t = type_of(name);
    EXPECT_EQ(H5Tget_class(t), H5T_STRING) << name;
    EXPECT_GT(H5Tis_variable_str(t), 0) << name;
    EXPECT_EQ(H5Tget_cset(t), H5T_CSET_UTF8) << name;
    H5Tclose(t);
  }
  for (auto [name, base] : {std::pair{"prompt_tokens", H5T_STD_I32LE}, std::pair{"output_tokens", H5T_STD_I32LE},
                            std::pair{"output_logprobs", H5T_IEEE_F32LE}}) {
    hid_t t = type_of(name);
    EXPECT_EQ(H5Tget_class(t), H5T_VLEN) << name;
    hid_t super = H5Tget_super(t);
    EXPECT_GT(H5Tequal(super, base), 0) << name;
    H5Tclose(super);
    H5Tclose(t);
  }
  for (auto [name, base] : {std::pair{"done", H5T_STD_U8LE}, std::pair{"is_greedy", H5T_STD_U8LE},
                            std::pair{"logprob_sum", H5T_IEEE_F64LE}}) {
    hid_t t = type_of(name);
    EXPECT_GT(H5Tequal(t, base), 0) << name;
    H5Tclose(t);
  }
}

TEST_F(ResultWriterTest, ZeroRowFileIsValid) {
  {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(0));
    EXPECT_TRUE(w->done_rows().empty());
    w->finish(RunMetrics{});
  }
  File f(path_);
  for (const char* name : kDatasets) {
    ASSERT_GT(H5Lexists(f.id, name, H5P_DEFAULT), 0) << name;
    EXPECT_EQ(rows_of(f.id, name), 0u) << name;
  }
  EXPECT_EQ(int_attr(f.id, "num_rows"), 0);
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
}

TEST_F(ResultWriterTest, IfExistsFailLeavesFileUntouched) {
  write_rows({0, 1}, 2, true);
  std::ifstream in(path_, std::ios::binary);
  std::string before((std::istreambuf_iterator<char>(in)), {});
  auto mtime = fs::last_write_time(path_);
  EXPECT_EQ(error_of_open(IfExists::kFail, info(2)), "output '" + path_ + "' exists (output.if_exists: fail)");
  std::ifstream in2(path_, std::ios::binary);
  std::string after((std::istreambuf_iterator<char>(in2)), {});
  EXPECT_EQ(before, after);
  EXPECT_EQ(fs::last_write_time(path_), mtime);
}

TEST_F(ResultWriterTest, IfExistsFailCreatesAbsentFile) {
  ResultWriter::open(path_, IfExists::kFail, info(1))->finish(RunMetrics{});
  EXPECT_TRUE(fs::exists(path_));
}

TEST_F(ResultWriterTest, OverwriteTruncates) {
  write_rows({0, 1}, 2, true);
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(3));
  EXPECT_EQ(w->done_rows(), std::vector<uint8_t>(3, 0));
}

TEST_F(ResultWriterTest, ResumeReportsDoneRows) {
  write_rows({0, 2}, 4, false);  // killed before finish: the writer's destructor flushed
  auto w = ResultWriter::open(path_, IfExists::kResume, info(4));
  EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 0, 1, 0}));
  w->write(row(1));
  w->write(row(3));
  w->finish(RunMetrics{});
  File f(path_);
  EXPECT_EQ(read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8), (std::vector<uint8_t>{1, 1, 1, 1}));
  EXPECT_EQ(read_strings(f.id, "id"), (std::vector<std::string>{"id-0", "id-1", "id-2", "id-3"}));
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
}

TEST_F(ResultWriterTest, ResumeOfAnAbsentFileCreatesItWhenTheFirstRowIsRecorded) {
  auto w = ResultWriter::open(path_, IfExists::kResume, info(2));
  EXPECT_EQ(w->done_rows(), std::vector<uint8_t>(2, 0));
  EXPECT_FALSE(fs::exists(path_));
  w->write(row(1));
  w->flush();
  File f(path_);
  EXPECT_EQ(read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8), (std::vector<uint8_t>{0, 0}));  // the journal has row 1
  w.reset();
  auto again = ResultWriter::open(path_, IfExists::kResume, info(2));
  EXPECT_EQ(again->done_rows(), (std::vector<uint8_t>{0, 1}));
}

TEST_F(ResultWriterTest, AJobWithNoRowsStillLeavesItsFileAtFinish) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(0));
  w->finish(RunMetrics{});
  File f(path_);
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
  EXPECT_FALSE(fs::exists(path_ + ".journal"));
}

TEST_F(ResultWriterTest, ResumeRefusesDifferentModel) {
  write_rows({0}, 2, false);
  RunInfo i = info(2);
  i.model = "models/other";
  std::string m = error_of_open(IfExists::kResume, i);
  EXPECT_NE(m.find("model 'models/tiny'"), std::string::npos) << m;
  EXPECT_NE(m.find(path_), std::string::npos) << m;
}

TEST_F(ResultWriterTest, ResumeRefusesDifferentTask) {
  write_rows({0}, 2, false);
  RunInfo i = info(2);
  i.task = "score";
  EXPECT_NE(error_of_open(IfExists::kResume, i).find("task 'generate'"), std::string::npos);
}

TEST_F(ResultWriterTest, ResumeRefusesDifferentRowCount) {
  write_rows({0}, 2, false);
  EXPECT_NE(error_of_open(IfExists::kResume, info(3)).find("holds 2 rows"), std::string::npos);
}

TEST_F(ResultWriterTest, ResumeRefusesDifferentSampling) {
  write_rows({0}, 2, false);
  RunInfo i = info(2);
  i.job_yaml = "model: models/tiny\ntask: generate\nsampling:\n  temperature: 0.7\n";
  std::string m = error_of_open(IfExists::kResume, i);
  EXPECT_NE(m.find("sampling.temperature"), std::string::npos) << m;
}

TEST_F(ResultWriterTest, ResumeAllowsDifferentEngineLayoutAndIfExists) {
  write_rows({0}, 2, false);
  RunInfo i = info(2);
  i.job_yaml = "model: models/tiny\ntask: generate\nsampling:\n  temperature: 0.0\nengine:\n  max_seqs: 8\n"
               "parallel:\n  tensor: 4\noutput:\n  if_exists: overwrite\n";
  i.world_size = 8;
  i.tensor_parallel = 4;
  auto w = ResultWriter::open(path_, IfExists::kResume, i);
  EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 0}));
  w->finish(RunMetrics{});  // this run's layout is in the file once it commits
  File f(path_);
  EXPECT_EQ(int_attr(f.id, "world_size"), 8);
  EXPECT_EQ(str_attr(f.id, "job_yaml"), i.job_yaml);
}

TEST_F(ResultWriterTest, ResumeRejectsFileThatIsNotResults) {
  std::ofstream(path_) << "not hdf5\n";
  std::string m = error_of_open(IfExists::kResume, info(2));
  EXPECT_NE(m.find(path_), std::string::npos) << m;
  EXPECT_NE(m.find("not an HDF5 file"), std::string::npos) << m;
  hid_t f = H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  EXPECT_NE(error_of_open(IfExists::kResume, info(2)).find("not a tpbatch results file"), std::string::npos);
}

TEST_F(ResultWriterTest, FinishSetsCompleteAndMetrics) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(1));
  w->write(row(0));
  w->flush();
  {
    File f0(path_);
    EXPECT_EQ(int_attr(f0.id, "complete"), 0);
  }
  RunMetrics m;
  m.wall_seconds = 2.5;
  m.prompt_tokens = 100;
  m.output_tokens = 50;
  m.output_tokens_per_second = 20;
  m.total_tokens_per_second = 60;
  m.ttft_p50 = 0.1, m.ttft_p90 = 0.2, m.ttft_p99 = 0.3;
  m.tpot_p50 = 0.01, m.tpot_p90 = 0.02, m.tpot_p99 = 0.03;
  w->finish(m);
  File f(path_);
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
  hid_t g = H5Gopen2(f.id, "metrics", H5P_DEFAULT);
  ASSERT_GE(g, 0);
  EXPECT_EQ(double_attr(g, "wall_seconds"), 2.5);
  EXPECT_EQ(int_attr(g, "prompt_tokens"), 100);
  EXPECT_EQ(int_attr(g, "output_tokens"), 50);
  EXPECT_EQ(double_attr(g, "output_tokens_per_second"), 20);
  EXPECT_EQ(double_attr(g, "total_tokens_per_second"), 60);
  EXPECT_EQ(double_attr(g, "ttft_p50_seconds"), 0.1);
  EXPECT_EQ(double_attr(g, "ttft_p99_seconds"), 0.3);
  EXPECT_EQ(double_attr(g, "tpot_p90_seconds"), 0.02);
  H5Gclose(g);
}

TEST_F(ResultWriterTest, FinishWithMissingRowsLeavesIncomplete) {
  write_rows({0}, 2, true);
  File f(path_);
  EXPECT_EQ(int_attr(f.id, "complete"), 0);
}

TEST_F(ResultWriterTest, InvalidUtf8StoredAsReplacementCharacter) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(1));
  RowResult r = row(0);
  r.output_text = "ab\xFF";
  w->write(r);
  w->finish(RunMetrics{});
  File f(path_);
  EXPECT_EQ(read_strings(f.id, "output_text")[0], "ab\xEF\xBF\xBD");
}

// One U+FFFD per byte that starts no valid sequence (not one per maximal invalid subpart, as
// tok::utf8_lossy does): a truncated 3-byte sequence is two, a surrogate three, an overlong two.
TEST_F(ResultWriterTest, InvalidUtf8ReplacedBytePerByte) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(1));
  RowResult r = row(0);
  r.output_text = "a\xE2\x82|\xED\xA0\x80|\xC0\xAF|\xF0\x9F\x98\x80";
  w->write(r);
  w->finish(RunMetrics{});
  File f(path_);
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(read_strings(f.id, "output_text")[0],
            "a" + fffd + fffd + "|" + fffd + fffd + fffd + "|" + fffd + fffd + "|\xF0\x9F\x98\x80");
}

TEST_F(ResultWriterTest, ManyRowsWrittenInBatches) {
  const int64_t n = 100000;
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Rows finish roughly in order, a few hundred out of place.
  std::mt19937 rng(1);
  for (int64_t i = 0; i + 64 < n; i += 64) std::shuffle(order.begin() + i, order.begin() + i + 64, rng);
  auto t0 = std::chrono::steady_clock::now();
  {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(n));
    for (int64_t i : order) w->write(row(i));
    w->finish(RunMetrics{});
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 30.0);
  File f(path_);
  auto done = read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8);
  EXPECT_EQ(std::count(done.begin(), done.end(), 1), n);
  auto ids = read_strings(f.id, "id");
  EXPECT_EQ(ids[n - 1], "id-" + std::to_string(n - 1));
  EXPECT_EQ(ids[12345], "id-12345");
}

TEST_F(ResultWriterTest, InspectPrintsSummary) {
  {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(3));
    w->write(row(0));
    RowResult bad;
    bad.index = 1;
    bad.id = "q-bad";
    bad.finish_reason = FinishReason::kError;
    bad.error = "input line 2: not valid JSON (x)";
    w->write(bad);
    RunMetrics m;
    m.wall_seconds = 4;
    m.output_tokens_per_second = 12.5;
    m.total_tokens_per_second = 30;
    w->finish(m);
  }
  std::ostringstream out;
  inspect_results(path_, out);
  std::string s = out.str();
  for (const char* want : {"models/tiny", "generate", "world 4 = tensor 2 x pipeline 1 x data 2", "2 / 3 done",
                           "complete    no", "errors      1 row", "q-bad", "input line 2: not valid JSON",
                           "prompt 2, output 0", "4.00 s", "12.5 output tokens/s", "eos 1", "error 1"})
    EXPECT_NE(s.find(want), std::string::npos) << "missing '" << want << "' in:\n" << s;
}

TEST_F(ResultWriterTest, InspectMissingFileNamed) {
  std::ostringstream out;
  try {
    inspect_results(path_, out);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path_), std::string::npos);
  }
}

// ---- locking, inspect while running, cumulative metrics, model fingerprint, verification ----

TEST_F(ResultWriterTest, SecondWriterOnLockedFileFailsWithoutTouchingIt) {
  auto running = ResultWriter::open(path_, IfExists::kOverwrite, info(3));
  running->write(row(0));
  running->flush();
  for (IfExists mode : {IfExists::kOverwrite, IfExists::kResume}) {
    const std::string msg = error_of_open(mode, info(3));
    EXPECT_NE(msg.find("locked by another running tpbatch job"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("overwrite"), std::string::npos) << "the hint must not suggest overwrite: " << msg;
  }
  running->write(row(1));
  running->write(row(2));
  running->finish(RunMetrics{});
  File f(path_);
  EXPECT_EQ(read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8), (std::vector<uint8_t>{1, 1, 1}));
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
}

TEST_F(ResultWriterTest, InspectReadsTheFileOfARunningWriter) {
  auto running = ResultWriter::open(path_, IfExists::kOverwrite, info(4));
  running->write(row(0));
  running->write(row(2));
  running->flush();
  std::ostringstream out;
  inspect_results(path_, out);
  EXPECT_NE(out.str().find("2 / 4 done"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("running     yes"), std::string::npos) << out.str();
  running->finish(RunMetrics{});
}

TEST_F(ResultWriterTest, MetricsAreTotalsOverResumedRuns) {
  RunMetrics first;
  first.wall_seconds = 10, first.prompt_tokens = 100, first.output_tokens = 50;
  {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(2));
    w->write(row(0));
    w->finish(first);
  }
  RunMetrics second;
  second.wall_seconds = 30, second.prompt_tokens = 300, second.output_tokens = 150, second.output_tokens_per_second = 5;
  {
    auto w = ResultWriter::open(path_, IfExists::kResume, info(2));
    w->write(row(1));
    w->finish(second);
  }
  File f(path_);
  hid_t g = H5Gopen2(f.id, "metrics", H5P_DEFAULT);
  EXPECT_DOUBLE_EQ(double_attr(g, "wall_seconds"), 40);
  EXPECT_EQ(int_attr(g, "prompt_tokens"), 400);
  EXPECT_EQ(int_attr(g, "output_tokens"), 200);
  EXPECT_EQ(int_attr(g, "runs"), 2);
  EXPECT_DOUBLE_EQ(double_attr(g, "output_tokens_per_second"), 5);
  EXPECT_DOUBLE_EQ(double_attr(g, "last_run_wall_seconds"), 30);
  H5Gclose(g);
}

TEST_F(ResultWriterTest, ResumeRefusesAChangedModelNamingTheFile) {
  RunInfo a = info(2);
  a.model_fingerprint = "config.json=00000000000000aa;model.safetensors=100:00000000000000bb";
  {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, a);
    w->write(row(0));
    w->finish(RunMetrics{});
  }
  RunInfo b = a;
  b.model_fingerprint = "config.json=00000000000000aa;model.safetensors=100:00000000000000cc";
  const std::string msg = error_of_open(IfExists::kResume, b);
  EXPECT_NE(msg.find("model.safetensors changed"), std::string::npos) << msg;
  EXPECT_EQ(model_fingerprint_difference(a.model_fingerprint, a.model_fingerprint), "");
}

TEST_F(ResultWriterTest, ResumeRecomputesDoneRowsWhoseDataDoesNotReadBack) {
  write_rows({0, 1, 2}, 3, true);
  {  // row 1 marked done but without a finish_reason: what a write cut off before its data looks like
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, no_locking());
    hid_t d = H5Dopen2(f, "finish_reason", H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    hsize_t start = 1, count = 1;
    hid_t fs_ = H5Dget_space(d), ms = H5Screate_simple(1, &count, nullptr);
    H5Sselect_hyperslab(fs_, H5S_SELECT_SET, &start, nullptr, &count, nullptr);
    const char* empty = "";
    EXPECT_GE(H5Dwrite(d, t, ms, fs_, H5P_DEFAULT, &empty), 0);
    H5Sclose(ms), H5Sclose(fs_), H5Tclose(t), H5Dclose(d), H5Fclose(f);
  }
  auto w = ResultWriter::open(path_, IfExists::kResume, info(3));
  EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 0, 1}));
}

TEST_F(ResultWriterTest, ResumeOfAFileAnOlderVersionLeftOpenCopiesItsRowsIntoAFreshFile) {
  write_rows({0, 2}, 4, true);
  {  // as an older tpbatch, which wrote the file in place, left it when killed: not closed, no commit id
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, no_locking());
    const int64_t open = 1;
    hid_t a = H5Aopen(f, "writer_open", H5P_DEFAULT);
    EXPECT_GE(H5Awrite(a, H5T_NATIVE_INT64, &open), 0);
    H5Aclose(a);
    EXPECT_GE(H5Adelete(f, "commit_id"), 0);
    H5Fclose(f);
  }
  auto w = ResultWriter::open(path_, IfExists::kResume, info(4));
  EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 0, 1, 0}));
  w->write(row(1));
  w->write(row(3));
  w->finish(RunMetrics{});
  EXPECT_FALSE(fs::exists(path_ + ".partial"));
  EXPECT_FALSE(fs::exists(path_ + ".journal"));
  File f(path_);
  EXPECT_EQ(int_attr(f.id, "writer_open"), 0);
  const RowResult r2 = row(2);
  EXPECT_EQ(read_strings(f.id, "id"), (std::vector<std::string>{"id-0", "id-1", "id-2", "id-3"}));
  EXPECT_EQ(read_strings(f.id, "output_text")[2], r2.output_text);
}

// ---- crash consistency: the results file is replaced whole; the journal holds rows since ----

TEST_F(ResultWriterTest, RowsFlushedBeforeAKillAreReplayedFromTheJournal) {
  killed_after([&] {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(4));
    w->write(row(0));
    w->write(row(2));
    w->flush();
  });
  {
    File f(path_);  // the results file is the commit made at start: no row done yet
    EXPECT_EQ(read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8), (std::vector<uint8_t>(4, 0)));
  }
  std::ostringstream inspected;
  inspect_results(path_, inspected);
  EXPECT_NE(inspected.str().find("2 / 4 done"), std::string::npos) << inspected.str();
  EXPECT_NE(inspected.str().find("journal     2 of these rows"), std::string::npos) << inspected.str();
}

TEST_F(ResultWriterTest, ACutOffJournalTailIsDroppedAndTheJournalGoesOnAfterIt) {
  killed_after([&] {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(3));
    w->write(row(0));
    w->flush();
    w->write(row(1));
    w->flush();
  });
  const std::string journal = path_ + ".journal";
  fs::resize_file(journal, fs::file_size(journal) - 3);  // row 1's record cut short
  killed_after([&] {  // killed again: row 2's record must follow row 0's, not the cut-off bytes
    auto w = ResultWriter::open(path_, IfExists::kResume, info(3));
    if (w->done_rows() != std::vector<uint8_t>{1, 0, 0}) throw Error("row 1's cut-off record was taken");
    w->write(row(2));
    w->flush();
  });
  auto w = ResultWriter::open(path_, IfExists::kResume, info(3));
  EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 0, 1}));
  w->write(row(1));
  w->finish(RunMetrics{});
  File f(path_);
  EXPECT_EQ(read_strings(f.id, "id"), (std::vector<std::string>{"id-0", "id-1", "id-2"}));
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
}

TEST_F(ResultWriterTest, AJournalOfAnEarlierCommitIsNotReplayed) {
  write_rows({0}, 2, true);
  const std::string journal = path_ + ".journal";
  killed_after([&] {
    auto w = ResultWriter::open(path_, IfExists::kResume, info(2));
    w->write(row(1));
    w->flush();
  });
  fs::copy_file(journal, journal + ".saved");
  write_rows({}, 2, true);  // a new file (overwrite): a new commit
  fs::rename(journal + ".saved", journal);  // the old journal back beside it
  auto w = ResultWriter::open(path_, IfExists::kResume, info(2));
  EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{0, 0}));
}

TEST_F(ResultWriterTest, OverwriteKeepsTheOldFileUntilTheNewJobRecordsARow) {
  write_rows({0, 1}, 2, true);
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, info(2));
  {
    File f(path_);
    EXPECT_EQ(read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8), (std::vector<uint8_t>{1, 1}));
  }
  w->write(row(0));
  w->flush();
  File f(path_);  // the new, empty file replaced it whole: never a truncated one; row 0 is in its journal
  EXPECT_EQ(read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8), (std::vector<uint8_t>{0, 0}));
  EXPECT_EQ(int_attr(f.id, "writer_open"), 0);
}

TEST_F(ResultWriterTest, OverwriteThatEndsBeforeAnyRowLeavesTheOldFileAndNothingBesideIt) {
  write_rows({0, 1}, 2, true);
  const std::string before = str_attr(File(path_).id, "commit_id");
  ResultWriter::open(path_, IfExists::kOverwrite, info(2)).reset();  // a start-up check failed
  File f(path_);
  EXPECT_EQ(str_attr(f.id, "commit_id"), before);
  EXPECT_EQ(read_fixed<uint8_t>(f.id, "done", H5T_NATIVE_UINT8), (std::vector<uint8_t>{1, 1}));
  EXPECT_FALSE(fs::exists(path_ + ".journal"));
  EXPECT_FALSE(fs::exists(path_ + ".partial"));
}

TEST_F(ResultWriterTest, ANewResultsFileGetsItsOwnRandomJobId) {
  write_rows({0}, 1, true);
  const std::string first = str_attr(File(path_).id, "job_id");
  EXPECT_EQ(first.size(), 32u);
  EXPECT_EQ(first.find_first_not_of("0123456789abcdef"), std::string::npos) << first;
  write_rows({0}, 1, true);  // overwrite: another job
  EXPECT_NE(str_attr(File(path_).id, "job_id"), first);
}

TEST_F(ResultWriterTest, InspectNamesTheJobId) {
  write_rows({0}, 1, true);
  std::ostringstream out;
  inspect_results(path_, out);
  EXPECT_NE(out.str().find("job id      " + str_attr(File(path_).id, "job_id") + "\n"), std::string::npos) << out.str();
}

TEST_F(ResultWriterTest, ANewFileTakesTheJobIdItIsGiven) {
  RunInfo i = info(1);
  i.job_id = "0123456789abcdef0123456789abcdef";
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, i);
  w->write(row(0));
  w->finish(RunMetrics{});
  EXPECT_EQ(str_attr(File(path_).id, "job_id"), i.job_id);
}

TEST_F(ResultWriterTest, ResumeKeepsTheJobId) {
  write_rows({0}, 2, false);
  const std::string id = str_attr(File(path_).id, "job_id");
  auto w = ResultWriter::open(path_, IfExists::kResume, info(2));
  w->write(row(1));
  w->finish(RunMetrics{});
  EXPECT_EQ(str_attr(File(path_).id, "job_id"), id);
}

TEST_F(ResultWriterTest, AFileOlderThanJobIdsGetsOneWhenResumed) {
  write_rows({0}, 2, false);
  {
    hid_t f = H5Fopen(path_.c_str(), H5F_ACC_RDWR, no_locking());
    EXPECT_GE(H5Adelete(f, "job_id"), 0);
    H5Fclose(f);
  }
  auto w = ResultWriter::open(path_, IfExists::kResume, info(2));
  w->write(row(1));
  w->finish(RunMetrics{});
  EXPECT_EQ(str_attr(File(path_).id, "job_id").size(), 32u);
}

TEST_F(ResultWriterTest, AnEmptyFileAtTheOutputIsResumedAsAbsent) {
  { std::ofstream(path_).flush(); }
  auto w = ResultWriter::open(path_, IfExists::kResume, info(2));
  EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{0, 0}));
}

TEST_F(ResultWriterTest, ASymlinkedOutputKeepsItsLinkAndTheTargetIsReplaced) {
  const std::string target = (dir_ / "target.h5").string();
  fs::create_symlink(target, path_);
  write_rows({0, 1}, 2, true);
  EXPECT_TRUE(fs::is_symlink(path_));
  File f(target);
  EXPECT_EQ(int_attr(f.id, "complete"), 1);
}

TEST(MissingRows, NamedByInputLine) {
  EXPECT_EQ(describe_missing_rows({1, 1}), "");
  EXPECT_EQ(describe_missing_rows({1, 0, 1}), "1 row is missing: input line 2");
  std::vector<uint8_t> many(20, 0);
  EXPECT_EQ(describe_missing_rows(many), "20 rows are missing: input lines 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, ...");
}
