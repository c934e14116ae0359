// The abort path of the CUDA backend's host waits (backend/nccl_watch.h), with fakes for the
// device work and the NCCL communicators: no GPU needed.
#include "backend/nccl_watch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"

namespace tpbatch {
namespace {

// A communicator whose asynchronous error appears after `healthy_polls` polls (never when < 0).
class FakeComm : public AsyncErrorSource {
 public:
  FakeComm(std::string name, int healthy_polls) : name_(std::move(name)), healthy_polls_(healthy_polls) {}
  std::string source_name() const override { return name_; }
  std::string poll_async_error() override {
    ++polls;
    return healthy_polls_ >= 0 && polls > healthy_polls_ ? "remote process exited" : "";
  }
  void abort() noexcept override { ++aborts; }
  int polls = 0, aborts = 0;

 private:
  std::string name_;
  int healthy_polls_;
};

TEST(NcclWatch, ReturnsWhenTheWorkFinishesAndAbortsNothing) {
  FakeComm tp("TP group", -1);
  int calls = 0;
  wait_watching([&] { return ++calls == 5; }, {&tp}, "download");
  EXPECT_EQ(calls, 5);
  EXPECT_EQ(tp.polls, 4);  // polled between the unfinished checks
  EXPECT_EQ(tp.aborts, 0);
}

TEST(NcclWatch, FinishedWorkNeedsNoPoll) {
  FakeComm tp("TP group", 0);  // would fail at once if asked
  wait_watching([] { return true; }, {&tp}, "download");
  EXPECT_EQ(tp.polls, 0);
}

TEST(NcclWatch, WithoutSourcesItJustWaits) {
  int calls = 0;
  wait_watching([&] { return ++calls == 300; }, {}, "synchronize", std::chrono::microseconds(1));
  EXPECT_EQ(calls, 300);
}

// A dead peer: the work never finishes (the NCCL kernel waits for it forever); the error the
// communicator reports ends the wait, every communicator of the stream is aborted, and the
// Error names the wait, the communicator and the error.
TEST(NcclWatch, AsyncErrorAbortsEveryCommunicatorAndThrows) {
  FakeComm tp("NCCL TP group", -1), pp("NCCL pipeline", 3);
  try {
    wait_watching([] { return false; }, {&tp, &pp}, "CUDA download", std::chrono::microseconds(1));
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("CUDA download"), std::string::npos) << what;
    EXPECT_NE(what.find("NCCL pipeline"), std::string::npos) << what;
    EXPECT_NE(what.find("remote process exited"), std::string::npos) << what;
    EXPECT_NE(what.find("aborted"), std::string::npos) << what;
    EXPECT_EQ(e.exit_code(), kExitFailure);
  }
  EXPECT_EQ(pp.polls, 4);
  EXPECT_EQ(tp.aborts, 1);
  EXPECT_EQ(pp.aborts, 1);
}

TEST(NcclWatch, AnErrorFromTheWorkItselfPropagatesWithoutAborting) {
  FakeComm tp("TP group", -1);
  EXPECT_THROW(wait_watching([]() -> bool { throw Error("CUDA error: illegal address"); }, {&tp}, "download"), Error);
  EXPECT_EQ(tp.aborts, 0);
}

}  // namespace
}  // namespace tpbatch
