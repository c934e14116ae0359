// The writer's FlushPolicy: buffered rows are recorded durably (the journal) after `rows` rows, or
// at the first row written `seconds` after the last flush; `tpbatch inspect` sees only those.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include "common/error.h"
#include "io/inspect_results.h"
#include "io/result_writer.h"
#include "results_file_test_util.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

class FlushPolicyTest : public ResultsFileTest {
 protected:
  // The rows a reader sees done: inspect's "rows N / M done" (no file yet: none).
  int64_t durable_rows() {
    if (!fs::exists(path_)) return 0;
    std::ostringstream out;
    inspect_results(path_, out);
    const std::string text = out.str();
    const size_t at = text.find("rows        ");
    EXPECT_NE(at, std::string::npos) << text;
    return std::stoll(text.substr(at + 12));
  }
};

constexpr double kNever = 1e9;  // seconds: no flush by time in these tests

}  // namespace

TEST_F(FlushPolicyTest, RowsAreBufferedUntilFlushRowsAreWritten) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, small_job(5), FlushPolicy{3, kNever});
  w->write(small_row(0));
  w->write(small_row(1));
  EXPECT_EQ(durable_rows(), 0);
  w->write(small_row(2));
  EXPECT_EQ(durable_rows(), 3);
  w->write(small_row(3));
  EXPECT_EQ(durable_rows(), 3);
}

TEST_F(FlushPolicyTest, FlushRowsOfOneRecordsEveryRowAsItIsWritten) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, small_job(3), FlushPolicy{1, kNever});
  w->write(small_row(1));
  EXPECT_EQ(durable_rows(), 1);
  w->write(small_row(0));
  EXPECT_EQ(durable_rows(), 2);
}

TEST_F(FlushPolicyTest, ARowWrittenFlushSecondsAfterTheLastFlushFlushes) {
  // seconds 0: every row is written at least 0 s after the last flush.
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, small_job(4), FlushPolicy{100, 0.0});
  w->write(small_row(0));
  EXPECT_EQ(durable_rows(), 1);
  w->write(small_row(3));
  EXPECT_EQ(durable_rows(), 2);
}

TEST_F(FlushPolicyTest, AnExplicitFlushRecordsTheBufferedRows) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, small_job(4), FlushPolicy{100, kNever});
  w->write(small_row(0));
  w->write(small_row(1));
  w->flush();
  EXPECT_EQ(durable_rows(), 2);
}
