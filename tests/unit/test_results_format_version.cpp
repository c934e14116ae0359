// The results file's format_version: files of the format this tpbatch writes and of older formats
// it knows are read and resumed; a newer format is refused by every reader, naming the version.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "common/error.h"
#include "io/inspect_results.h"
#include "io/merge_results.h"
#include "io/result_writer.h"
#include "results_file_test_util.h"
#include "io/results_reader.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

// Edits a closed results file with the HDF5 C API, as another tpbatch version would have written it.
class FileEdit {
 public:
  explicit FileEdit(const std::string& path) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, false, true);
    id_ = H5Fopen(path.c_str(), H5F_ACC_RDWR, fapl);
    H5Pclose(fapl);
    EXPECT_GE(id_, 0) << path;
  }
  ~FileEdit() { H5Fclose(id_); }
  void set_format_version(int64_t v) {
    H5Adelete(id_, "format_version");
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(id_, "format_version", H5T_STD_I64LE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
    H5Sclose(space);
  }
  void delete_dataset(const char* name) { EXPECT_GE(H5Ldelete(id_, name, H5P_DEFAULT), 0) << name; }
  bool has_dataset(const char* name) const { return H5Lexists(id_, name, H5P_DEFAULT) > 0; }

 private:
  hid_t id_ = -1;
};

int64_t format_version_of(const std::string& path) {
  return ResultsReader::open(path, path).int_attribute("format_version");
}

class ResultsFormatVersionTest : public ResultsFileTest {
 protected:
  // A finished file of `rows` rows, of this tpbatch's format, with rows 0 and 1 done.
  void write_file(int64_t rows) {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, small_job(rows));
    w->write(small_row(0));
    w->write(small_row(1));
    w->finish(RunMetrics{});
  }
  // The Error message `f` throws; fails the test when it throws none.
  template <typename F>
  std::string error_of(F&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
};

const std::string kNewer = "format_version is " + std::to_string(kResultsFormatVersion + 1);

}  // namespace

TEST_F(ResultsFormatVersionTest, ANewFileHasTheFormatVersionThisTpbatchWrites) {
  write_file(3);
  EXPECT_EQ(format_version_of(path_), kResultsFormatVersion);
}

TEST_F(ResultsFormatVersionTest, AFileOfANewerFormatIsNotResumedAndTheMessageNamesItsVersion) {
  write_file(3);
  FileEdit(path_).set_format_version(kResultsFormatVersion + 1);
  const std::string m = error_of([&] { ResultWriter::open(path_, IfExists::kResume, small_job(3)); });
  EXPECT_NE(m.find("cannot be resumed"), std::string::npos) << m;
  EXPECT_NE(m.find(kNewer), std::string::npos) << m;
}

TEST_F(ResultsFormatVersionTest, AFileOfANewerFormatIsNotReadAndTheMessageNamesTheFileAndItsVersion) {
  write_file(3);
  FileEdit(path_).set_format_version(kResultsFormatVersion + 1);
  const std::string m = error_of([&] { ResultsReader::open_to_read(path_); });
  EXPECT_NE(m.find(path_), std::string::npos) << m;
  EXPECT_NE(m.find(kNewer), std::string::npos) << m;
}

TEST_F(ResultsFormatVersionTest, InspectRefusesAFileOfANewerFormat) {
  write_file(3);
  FileEdit(path_).set_format_version(kResultsFormatVersion + 1);
  std::ostringstream out;
  const std::string m = error_of([&] { inspect_results(path_, out); });
  EXPECT_NE(m.find(kNewer), std::string::npos) << m;
}

TEST_F(ResultsFormatVersionTest, MergeRefusesAPartOfANewerFormat) {
  write_file(3);
  FileEdit(path_).set_format_version(kResultsFormatVersion + 1);
  std::ostringstream out;
  const std::string m = error_of([&] { merge_results(MergeOptions{(dir_ / "merged.h5").string(), {path_}}, out); });
  EXPECT_NE(m.find(path_), std::string::npos) << m;
  EXPECT_NE(m.find(kNewer), std::string::npos) << m;
}

TEST_F(ResultsFormatVersionTest, AFileOfFormat1WithoutTheTopLogprobDatasetsReadsItsRowsWithoutTopLogprobs) {
  write_file(3);
  {
    FileEdit f(path_);
    f.delete_dataset("top_logprob_tokens");
    f.delete_dataset("top_logprobs");
    f.set_format_version(1);
  }
  ResultsReader r = ResultsReader::open_to_read(path_);
  EXPECT_EQ(r.read_done(), (std::vector<uint8_t>{1, 1, 0}));
  const std::vector<RowResult> rows = r.read_rows(0, 2);
  EXPECT_EQ(rows[1].id, "id-1");
  EXPECT_EQ(rows[1].output_tokens, std::vector<int32_t>{7});
  EXPECT_TRUE(rows[1].top_logprob_tokens.empty());
}

TEST_F(ResultsFormatVersionTest, AFileOfFormat1IsResumedAndLeftInTheCurrentFormat) {
  write_file(3);
  {
    FileEdit f(path_);
    f.delete_dataset("top_logprob_tokens");
    f.delete_dataset("top_logprobs");
    f.set_format_version(1);
  }
  {
    auto w = ResultWriter::open(path_, IfExists::kResume, small_job(3));
    EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 1, 0}));
    w->write(small_row(2));
    w->finish(RunMetrics{});
  }
  EXPECT_EQ(format_version_of(path_), kResultsFormatVersion);
  FileEdit f(path_);
  EXPECT_TRUE(f.has_dataset("top_logprob_tokens"));
  EXPECT_TRUE(f.has_dataset("top_logprobs"));
}

// Format 2: before /reasoning_text.
void make_format_2(const std::string& path) {
  FileEdit f(path);
  f.delete_dataset("reasoning_text");
  f.set_format_version(2);
}

TEST_F(ResultsFormatVersionTest, AFileOfFormat2WithoutReasoningTextReadsItsRowsWithNone) {
  write_file(3);
  make_format_2(path_);
  ResultsReader r = ResultsReader::open_to_read(path_);
  const std::vector<RowResult> rows = r.read_rows(0, 2);
  EXPECT_EQ(rows[1].id, "id-1");
  EXPECT_EQ(rows[1].output_tokens, std::vector<int32_t>{7});
  EXPECT_EQ(rows[1].reasoning_text, "");
}

TEST_F(ResultsFormatVersionTest, AFileOfFormat2IsResumedAndLeftInTheCurrentFormatWithItsReasoningText) {
  write_file(3);
  make_format_2(path_);
  {
    auto w = ResultWriter::open(path_, IfExists::kResume, small_job(3));
    EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 1, 0}));
    RowResult row = small_row(2);
    row.reasoning_text = "Two and two.";
    w->write(row);
    w->finish(RunMetrics{});
  }
  EXPECT_EQ(format_version_of(path_), kResultsFormatVersion);
  EXPECT_TRUE(FileEdit(path_).has_dataset("reasoning_text"));
  const std::vector<RowResult> rows = ResultsReader::open_to_read(path_).read_rows(0, 3);
  EXPECT_EQ(rows[0].reasoning_text, "");  // a row of the old run
  EXPECT_EQ(rows[2].reasoning_text, "Two and two.");
}

TEST_F(ResultsFormatVersionTest, AFileOfTheCurrentFormatWithoutReasoningTextIsRefusedNamingIt) {
  write_file(3);
  FileEdit(path_).delete_dataset("reasoning_text");
  const std::string m = error_of([&] { ResultWriter::open(path_, IfExists::kResume, small_job(3)); });
  EXPECT_NE(m.find("it has no dataset '/reasoning_text'"), std::string::npos) << m;
}

TEST_F(ResultsFormatVersionTest, AFileOfTheCurrentFormatWithoutADatasetIsRefusedNamingIt) {
  write_file(3);
  FileEdit(path_).delete_dataset("top_logprobs");
  const std::string m = error_of([&] { ResultWriter::open(path_, IfExists::kResume, small_job(3)); });
  EXPECT_NE(m.find("it has no dataset '/top_logprobs'"), std::string::npos) << m;
}

TEST_F(ResultsFormatVersionTest, AFormatVersionBelow1IsRefused) {
  write_file(3);
  FileEdit(path_).set_format_version(0);
  const std::string m = error_of([&] { ResultsReader::open_to_read(path_); });
  EXPECT_NE(m.find("format_version is 0"), std::string::npos) << m;
}
