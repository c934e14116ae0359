// ControlChannel, the control plane's messages, on one rank talking to itself (MPI_COMM_SELF):
// order, lengths, non-blocking receives and sends that own their bytes. Several ranks are
// exercised by the MPI tests (tests/mpi/), whose steps, rows and results all travel through it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "comm/control_channel.h"
#include "comm/singleton_start.h"

namespace tpbatch {
namespace {

constexpr int kTag = 7;
constexpr int kOtherTag = 8;

class ControlChannelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;
    prepare_singleton_start();
    MPI_Init(nullptr, nullptr);  // a singleton: no launcher needed
    std::atexit([] { MPI_Finalize(); });
  }
  ControlChannel channel_{MPI_COMM_SELF};
};

TEST_F(ControlChannelTest, MessagesArriveInTheOrderTheyWereSent) {
  channel_.send("first", 0, kTag);
  channel_.send("second", 0, kTag);
  EXPECT_EQ(channel_.recv(0, kTag).bytes, "first");
  EXPECT_EQ(channel_.recv(0, kTag).bytes, "second");
}

TEST_F(ControlChannelTest, AMessageOfAnyLengthArrivesWhole) {
  const std::string big(3 << 20, 'x');
  channel_.send(big, 0, kTag);
  EXPECT_EQ(channel_.recv(0, kTag).bytes, big);
}

TEST_F(ControlChannelTest, AnEmptyMessageArrivesEmpty) {
  channel_.send("", 0, kTag);
  EXPECT_EQ(channel_.recv(0, kTag).bytes, "");
}

TEST_F(ControlChannelTest, ReceivingFromAnyoneReportsTheSourceAndTag) {
  channel_.send("hello", 0, kOtherTag);
  const ControlMessage m = channel_.recv(ControlChannel::kAnySource, ControlChannel::kAnyTag);
  EXPECT_EQ(m.source, 0);
  EXPECT_EQ(m.tag, kOtherTag);
  EXPECT_EQ(m.bytes, "hello");
}

TEST_F(ControlChannelTest, TryRecvFindsNothingBeforeASend) {
  ControlMessage m;
  m.bytes = "untouched";
  EXPECT_FALSE(channel_.try_recv(0, kTag, m));
  EXPECT_EQ(m.bytes, "untouched");
}

TEST_F(ControlChannelTest, TryRecvTakesOnlyTheTagAskedFor) {
  channel_.send("other", 0, kOtherTag);
  ControlMessage m;
  EXPECT_FALSE(channel_.try_recv(0, kTag, m));
  ASSERT_TRUE(channel_.try_recv(0, kOtherTag, m));
  EXPECT_EQ(m.bytes, "other");
}

TEST_F(ControlChannelTest, TheSentStringMayChangeRightAfterTheSend) {
  std::string bytes = "kept by the channel";
  channel_.send(bytes, 0, kTag);
  bytes.assign(bytes.size(), '?');
  EXPECT_EQ(channel_.recv(0, kTag).bytes, "kept by the channel");
}

TEST_F(ControlChannelTest, DrainLeavesNoSendInFlight) {
  channel_.send("a", 0, kTag);
  channel_.send("b", 0, kTag);
  EXPECT_EQ(channel_.recv(0, kTag).bytes, "a");
  EXPECT_EQ(channel_.recv(0, kTag).bytes, "b");
  channel_.drain();
  EXPECT_EQ(channel_.sends_in_flight(), 0u);
}

TEST_F(ControlChannelTest, BroadcastOnOneRankKeepsTheRootsBytes) {
  std::string bytes = "step";
  channel_.broadcast(bytes, 0, "broadcast in a test");
  EXPECT_EQ(bytes, "step");
}

}  // namespace
}  // namespace tpbatch
