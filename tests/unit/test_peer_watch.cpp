// The heartbeats' bookkeeping (reliability/peer_watch.h): who counts as silent, and when a rank
// must not judge because it was not watching itself.
#include "reliability/peer_watch.h"

#include <gtest/gtest.h>

#include "reliability/heartbeat.h"

namespace tpbatch {
namespace {

TEST(PeerWatch, PeerSilentOnlyAfterTheTimeoutWithoutABeat) {
  PeerWatch w(3, 0, 100.0);
  for (double t = 100.0; t <= 110.0; t += 0.5) {  // rank 1 beats, rank 2 goes quiet after 101
    w.start_round(t, 2.0);
    w.beat(1, t);
    if (t <= 101.0) w.beat(2, t);
    if (t <= 104.0) EXPECT_TRUE(w.silent(t, 3.0).empty()) << t;
  }
  EXPECT_EQ(w.silent(110.0, 3.0), std::vector<int>{2});
  EXPECT_DOUBLE_EQ(w.last_heard(2), 101.0);
}

TEST(PeerWatch, NeverJudgesItself) {
  PeerWatch w(2, 1, 0.0);
  w.start_round(0.5, 10.0);
  w.beat(0, 0.5);
  EXPECT_EQ(w.silent(0.6, 0.05), std::vector<int>{0});  // rank 0 is silent, rank 1 is never judged
}

TEST(PeerWatch, ZeroTimeoutJudgesNobody) {
  PeerWatch w(4, 0, 0.0);
  EXPECT_TRUE(w.silent(1e6, 0.0).empty());
}

TEST(PeerWatch, AGapInItsOwnRoundsRestartsEveryClock) {
  // This rank was stopped (or starved) from 10 to 40: its peers' beats from that time were not
  // drained yet, so it must not call them silent.
  PeerWatch w(3, 0, 0.0);
  for (double t = 0; t <= 10.0; t += 0.1) {
    w.start_round(t, 1.5);
    w.beat(1, t);
    w.beat(2, t);
  }
  EXPECT_TRUE(w.start_round(40.0, 1.5));
  EXPECT_TRUE(w.silent(40.0, 3.0).empty());
  EXPECT_TRUE(w.silent(42.9, 3.0).empty());
  EXPECT_EQ(w.silent(43.1, 3.0), (std::vector<int>{1, 2}));  // still nothing after a full timeout
  EXPECT_FALSE(w.start_round(40.5, 1.5));                     // regular rounds restart nothing
}

TEST(PeerWatch, RestartGivesEveryPeerAFullTimeout) {
  PeerWatch w(2, 0, 0.0);
  w.restart(50.0);  // e.g. the timeout went from 300 s to 3 s
  EXPECT_TRUE(w.silent(52.0, 3.0).empty());
  EXPECT_EQ(w.silent(53.5, 3.0), std::vector<int>{1});
}

TEST(PeerWatch, AForgottenPeerIsNoLongerWatched) {
  PeerWatch w(3, 0, 0.0);
  w.forget(2);  // it said "leaving": its silence from now on is expected
  w.beat(1, 5.0);
  EXPECT_TRUE(w.silent(7.0, 3.0).empty());
  EXPECT_EQ(w.silent(9.0, 3.0), std::vector<int>{1});
}

TEST(PeerWatch, AnOldBeatNeverMovesTheClockBack) {
  PeerWatch w(2, 0, 0.0);
  w.beat(1, 10.0);
  w.beat(1, 9.0);
  EXPECT_DOUBLE_EQ(w.last_heard(1), 10.0);
}

TEST(Heartbeat, BeatsTenTimesPerTimeoutAtMostOncePerSecond) {
  EXPECT_DOUBLE_EQ(Heartbeat::beat_period(3.0), 0.3);
  EXPECT_DOUBLE_EQ(Heartbeat::beat_period(300.0), 1.0);  // all-to-all: ranks^2 messages per period
  EXPECT_DOUBLE_EQ(Heartbeat::beat_period(0.0), 1.0);    // off: beats only for the final barrier
  EXPECT_DOUBLE_EQ(Heartbeat::beat_period(0.05), 0.02);
}

}  // namespace
}  // namespace tpbatch
