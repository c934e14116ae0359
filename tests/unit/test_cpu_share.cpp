// The default CPU threads per rank and the machine's cores from the local ranks' affinity masks
// (topology/cpu_share.h): a rank's CPUs divided by the most ranks holding any one of them.
#include "topology/cpu_share.h"

#include <gtest/gtest.h>

#include <initializer_list>

namespace tpbatch {
namespace {

CpuMask cpus(std::initializer_list<int> list) {
  CpuMask m;
  for (int c : list) {
    if (m.size() <= static_cast<size_t>(c) / 64) m.resize(static_cast<size_t>(c) / 64 + 1, 0);
    m[static_cast<size_t>(c) / 64] |= uint64_t{1} << (c % 64);
  }
  return m;
}

CpuMask range(int first, int last) {
  CpuMask m;
  for (int c = first; c <= last; ++c) {
    if (m.size() <= static_cast<size_t>(c) / 64) m.resize(static_cast<size_t>(c) / 64 + 1, 0);
    m[static_cast<size_t>(c) / 64] |= uint64_t{1} << (c % 64);
  }
  return m;
}

TEST(CpuShare, SingleRankGetsAllItsCpus) {
  const CpuShare s = share_cpus({range(0, 7)}, 0);
  EXPECT_EQ(s.own_cpus, 8);
  EXPECT_EQ(s.sharing, 1);
  EXPECT_EQ(s.threads, 8);
  EXPECT_EQ(s.machine_cpus, 8);
  EXPECT_EQ(s.local_ranks, 1);
}

TEST(CpuShare, SingleRankRestrictedToOneCpuGetsOneThread) {  // taskset -c 0 on a bigger machine
  const CpuShare s = share_cpus({cpus({0})}, 0);
  EXPECT_EQ(s.threads, 1);
  EXPECT_EQ(s.machine_cpus, 1);
}

TEST(CpuShare, RanksSharingTheSameCpusSplitThem) {  // 2 ranks in an 8-CPU cpuset of a 64-core node
  const std::vector<CpuMask> masks{range(8, 15), range(8, 15)};
  for (int self : {0, 1}) {
    const CpuShare s = share_cpus(masks, self);
    EXPECT_EQ(s.sharing, 2);
    EXPECT_EQ(s.threads, 4);
    EXPECT_EQ(s.machine_cpus, 8);
    EXPECT_EQ(s.local_ranks, 2);
  }
}

TEST(CpuShare, RanksBoundToDisjointCpusEachGetTheirOwn) {  // mpirun's bind-to-core
  const std::vector<CpuMask> masks{cpus({0}), cpus({1}), cpus({2}), cpus({3})};
  for (int self = 0; self < 4; ++self) {
    const CpuShare s = share_cpus(masks, self);
    EXPECT_EQ(s.sharing, 1);
    EXPECT_EQ(s.threads, 1);
    EXPECT_EQ(s.machine_cpus, 4);
  }
}

TEST(CpuShare, DisjointCpusetsOfDifferentSizesKeepTheirSizes) {
  const std::vector<CpuMask> masks{range(0, 5), range(6, 7)};
  EXPECT_EQ(share_cpus(masks, 0).threads, 6);
  EXPECT_EQ(share_cpus(masks, 1).threads, 2);
  EXPECT_EQ(share_cpus(masks, 0).machine_cpus, 8);
}

TEST(CpuShare, OverlappingMasksDivideByTheMostHoldersOfAnyOwnCpu) {
  // Rank 0 on 0-3, rank 1 on 2-5, rank 2 on 3-7: CPU 3 is held by all three.
  const std::vector<CpuMask> masks{range(0, 3), range(2, 5), range(3, 7)};
  const CpuShare s0 = share_cpus(masks, 0), s1 = share_cpus(masks, 1), s2 = share_cpus(masks, 2);
  EXPECT_EQ(s0.sharing, 3);
  EXPECT_EQ(s0.threads, 1);  // 4 CPUs / 3
  EXPECT_EQ(s1.sharing, 3);
  EXPECT_EQ(s1.threads, 1);  // 4 / 3
  EXPECT_EQ(s2.sharing, 3);
  EXPECT_EQ(s2.threads, 1);  // 5 / 3
  EXPECT_EQ(s0.machine_cpus, 8);
}

TEST(CpuShare, OverlapElsewhereDoesNotCountAgainstARank) {
  // Ranks 1 and 2 share CPUs 4-7; rank 0's CPUs 0-3 are its own.
  const std::vector<CpuMask> masks{range(0, 3), range(4, 7), range(4, 7)};
  EXPECT_EQ(share_cpus(masks, 0).threads, 4);
  EXPECT_EQ(share_cpus(masks, 1).threads, 2);
  EXPECT_EQ(share_cpus(masks, 0).machine_cpus, 8);
}

TEST(CpuShare, MoreRanksThanCpusStillGetOneThreadEach) {  // 4 ranks on 2 cores
  const std::vector<CpuMask> masks(4, range(0, 1));
  const CpuShare s = share_cpus(masks, 3);
  EXPECT_EQ(s.sharing, 4);
  EXPECT_EQ(s.threads, 1);
  EXPECT_EQ(s.machine_cpus, 2);
}

TEST(CpuShare, MasksOfDifferentLengthsCompareByCpu) {  // CPUs above 63 live in a second word
  const std::vector<CpuMask> masks{cpus({1, 70}), cpus({70})};
  const CpuShare s = share_cpus(masks, 0);
  EXPECT_EQ(s.own_cpus, 2);
  EXPECT_EQ(s.sharing, 2);
  EXPECT_EQ(s.threads, 1);
  EXPECT_EQ(s.machine_cpus, 2);
}

TEST(CpuShare, OwnMaskWithoutMpiHasThisProcessCpus) {  // not initialised in the unit tests
  const CpuShare s = cpu_share();
  EXPECT_GE(s.own_cpus, 1);
  EXPECT_EQ(s.local_ranks, 1);
  EXPECT_EQ(s.threads, s.own_cpus);
  EXPECT_EQ(s.machine_cpus, s.own_cpus);
}

}  // namespace
}  // namespace tpbatch
