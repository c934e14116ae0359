// RowDispatcher, world rank 0's side of data parallelism, driven without a job: two replicas (rank
// 0's own and the one led by world rank 1) ask for lines as rank 0 serves them (read_rows with the
// asking leader's rank) and return them (record), on a real input file, with a writer that keeps
// nothing. MPI is not initialised: no message is sent (only serve() uses the control communicator),
// and the dispatcher's MPI_Wtime is a plain clock in Open MPI.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "temp_dir_test.h"
#include "engine/progress.h"
#include "engine/row_dispatcher.h"
#include "io/result_writer.h"
#include "job/job_spec.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

class DiscardingWriter final : public ResultWriter {
 public:
  explicit DiscardingWriter(size_t rows) : done_(rows, 0) {}
  const std::vector<uint8_t>& done_rows() const override { return done_; }
  void write(RowResult) override {}
  void flush() override {}
  void finish(const RunMetrics&) override {}

 private:
  std::vector<uint8_t> done_;
};

constexpr int kRankZerosReplica = 0;
constexpr int kRankOnesReplica = 1;
constexpr int64_t kLines = 4;   // even: each replica's fair share is exactly half
constexpr size_t kAsks = 8;     // a replica asks for more lines than the job has

class RowDispatcherTest : public tpbatch::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    const std::string input = (dir_ / "in.jsonl").string();
    {
      std::ofstream f(input, std::ios::binary);
      for (int64_t i = 0; i < kLines; ++i) f << "{\"prompt\": \"line " << i << "\"}\n";
    }
    quiet_ = std::fopen("/dev/null", "w");
    ASSERT_NE(quiet_, nullptr);
    writer_ = std::make_unique<DiscardingWriter>(kLines);
    progress_ = std::make_unique<Progress>(kLines, 0, 1e9, quiet_);
    dispatcher_ = std::make_unique<RowDispatcher>(input, job_, kLines, writer_->done_rows(), *writer_, *progress_,
                                                  MPI_COMM_NULL, /*remote_replicas=*/1);
  }
  void TearDown() override {
    dispatcher_.reset();
    if (quiet_) std::fclose(quiet_);
    fs::remove_all(dir_);
  }

  std::vector<WorkItem> ask(int replica) {
    std::vector<WorkItem> lines;
    told_more_ = dispatcher_->read_rows(lines, kAsks, replica);
    return lines;
  }
  void give_back(const std::vector<WorkItem>& lines) {
    for (const WorkItem& item : lines) {
      RowResult row;
      row.index = item.first_row;
      row.line = item.index;
      row.sample = item.samples.at(0);
      row.finish_reason = FinishReason::kLength;
      dispatcher_->record(row);
    }
  }
  // Each replica takes its fair share, half the lines; the second read is stopped by that share with
  // the last line read, not by reading past it. Both return every line before either asks again.
  void hand_out_every_line_and_take_it_back() {
    const std::vector<WorkItem> first = ask(kRankZerosReplica);
    const std::vector<WorkItem> second = ask(kRankOnesReplica);
    ASSERT_EQ(first.size(), static_cast<size_t>(kLines / 2));
    ASSERT_EQ(second.size(), static_cast<size_t>(kLines / 2));
    ASSERT_EQ(second.back().index, kLines - 1);
    give_back(first);
    give_back(second);
  }

  JobSpec job_;
  std::FILE* quiet_ = nullptr;
  std::unique_ptr<DiscardingWriter> writer_;
  std::unique_ptr<Progress> progress_;
  std::unique_ptr<RowDispatcher> dispatcher_;
  bool told_more_ = false;
};

// Told "more" with no lines, a remote replica asks again and again, and rank 0 waits for it forever
// (the hang fixed in 25337b3: e2e.test_context_limits' DP=2 run, killed at its timeout).
TEST_F(RowDispatcherTest, RemoteReplicaAskingOnceEveryLineIsHandedOutAndReturnedIsToldNoMore) {
  hand_out_every_line_and_take_it_back();
  const std::vector<WorkItem> lines = ask(kRankOnesReplica);
  EXPECT_TRUE(lines.empty());
  EXPECT_FALSE(told_more_) << "told 'more' with every line done: it would ask again forever";
}

// Told "more" with no lines, rank 0's replica waits for a message from the others that never comes.
TEST_F(RowDispatcherTest, RankZerosReplicaAskingOnceEveryLineIsHandedOutAndReturnedIsToldNoMore) {
  hand_out_every_line_and_take_it_back();
  const std::vector<WorkItem> lines = ask(kRankZerosReplica);
  EXPECT_TRUE(lines.empty());
  EXPECT_FALSE(told_more_) << "told 'more' with every line done: it would wait for the other replica forever";
}

}  // namespace
