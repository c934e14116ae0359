// Communicator's counting, which every data plane (MPI, NCCL, the tests' stand-ins) shares: calls
// and bytes per operation, and seconds from the timing hooks -- the host clock by default, or what
// a device communicator reports once its timings settle.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "comm/communicator.h"
#include "common/error.h"

namespace tpbatch {
namespace {

class GroupOfFour : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 4; }

 private:
  void run_allreduce_sum(BufferView, size_t) override {}
  void run_allreduce_max(BufferView, size_t) override {}
  void run_allgather(BufferView, BufferView, size_t) override {}
  void run_send(BufferView, size_t, int) override {}
  void run_recv(BufferView, size_t, int) override {}
};

// Reports each call as taking half a second, but only when its timings settle (as CUDA events do).
class DeviceTimed final : public GroupOfFour {
 public:
  int settled = 0;

 private:
  void start_timing() override {}
  void stop_timing(const std::string& op) override { pending_.push_back(op); }
  void settle_timings() override {
    for (const std::string& op : pending_) add_seconds(op, 0.5);
    pending_.clear();
    ++settled;
  }
  std::vector<std::string> pending_;
};

const BufferView kF32{nullptr, DType::F32};
const BufferView kBf16{nullptr, DType::BF16};

TEST(CommunicatorStats, AllreduceCountsCallsAndTheBytesOfItsDtype) {
  GroupOfFour c;
  c.allreduce_sum(kF32, 10);
  c.allreduce_sum(kBf16, 10);
  EXPECT_EQ(c.stats().at("allreduce").calls, 2);
  EXPECT_EQ(c.stats().at("allreduce").bytes, 10 * 4 + 10 * 2);
}

TEST(CommunicatorStats, AllreduceMaxIsCountedApartFromTheSumsAndTakesF32Only) {
  GroupOfFour c;
  c.allreduce_sum(kF32, 10);
  c.allreduce_max(kF32, 3);
  EXPECT_EQ(c.stats().at("allreduce").calls, 1);
  EXPECT_EQ(c.stats().at("allreduce max").calls, 1);
  EXPECT_EQ(c.stats().at("allreduce max").bytes, 12);
  EXPECT_THROW(c.allreduce_max(kBf16, 3), Error);
}

TEST(CommunicatorStats, AllgatherCountsTheBytesOfEveryRank) {
  GroupOfFour c;
  c.allgather(kF32, kF32, 100);
  EXPECT_EQ(c.stats().at("allgather").bytes, 400);
}

TEST(CommunicatorStats, SendAndRecvAreCountedApart) {
  GroupOfFour c;
  c.send(kF32, 8, 1);
  c.recv(kF32, 16, 1);
  c.recv(kF32, 16, 1);
  EXPECT_EQ(c.stats().at("send").calls, 1);
  EXPECT_EQ(c.stats().at("recv").calls, 2);
  EXPECT_EQ(c.stats().at("recv").bytes, 32);
}

TEST(CommunicatorStats, OperationsNeverCalledAreAbsent) {
  GroupOfFour c;
  c.send(kF32, 8, 1);
  EXPECT_EQ(c.stats().count("allreduce"), 0u);
}

TEST(CommunicatorStats, ResetForgetsEveryCount) {
  GroupOfFour c;
  c.allreduce_sum(kF32, 10);
  c.reset_stats();
  EXPECT_TRUE(c.stats().empty());
}

TEST(CommunicatorStats, DeviceTimingsAreAddedWhenTheStatsAreRead) {
  DeviceTimed c;
  c.allreduce_sum(kF32, 10);
  c.allreduce_sum(kF32, 10);
  const CollectiveStats& s = c.stats().at("allreduce");
  EXPECT_EQ(c.settled, 1);
  EXPECT_DOUBLE_EQ(s.seconds, 1.0);
}

}  // namespace
}  // namespace tpbatch
