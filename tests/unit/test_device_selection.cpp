#include "backend/device_selection.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace tpbatch {
namespace {

TEST(DeviceForLocalRank, OneRankPerDeviceMapsIdentically) {
  for (int r = 0; r < 8; ++r) EXPECT_EQ(device_for_local_rank(r, 8), r);
}

TEST(DeviceForLocalRank, MoreRanksThanDevicesWrapAround) {
  EXPECT_EQ(device_for_local_rank(5, 4), 1);
  EXPECT_EQ(device_for_local_rank(3, 1), 0);
}

TEST(DeviceForLocalRank, NoVisibleDeviceIsAnError) { EXPECT_THROW(device_for_local_rank(0, 0), Error); }

TEST(DeviceForLocalRank, NegativeRankIsAnError) { EXPECT_THROW(device_for_local_rank(-1, 2), Error); }

TEST(ChooseBackend, CpuStaysCpuEvenWithGpus) { EXPECT_EQ(choose_backend("cpu", true), "cpu"); }

TEST(ChooseBackend, AutoPicksCudaWhenEveryRankHasAGpu) { EXPECT_EQ(choose_backend("auto", true), "cuda"); }

TEST(ChooseBackend, AutoFallsBackToCpuWhenSomeRankLacksAGpu) { EXPECT_EQ(choose_backend("auto", false), "cpu"); }

TEST(ChooseBackend, CudaWithGpusIsCuda) { EXPECT_EQ(choose_backend("cuda", true), "cuda"); }

TEST(ChooseBackend, CudaWithoutGpusIsAJobErrorNamingTheProblem) {
  try {
    choose_backend("cuda", false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
    EXPECT_NE(std::string(e.what()).find("CUDA GPU"), std::string::npos) << e.what();
  }
}

TEST(ChooseBackend, UnknownSettingIsAJobError) { EXPECT_THROW(choose_backend("tpu", true), Error); }

TEST(CustomAllreduce, SmallMessagesOnFourRanksAreOneShot) {
  EXPECT_EQ(use_custom_allreduce(16, 4, true, true), AllreduceAlgo::OneShot);
  EXPECT_EQ(use_custom_allreduce((512 << 10) - 16, 4, true, true), AllreduceAlgo::OneShot);
}

TEST(CustomAllreduce, FourRanksSwitchToTwoShotAt512KiB) {
  EXPECT_EQ(use_custom_allreduce(512 << 10, 4, true, true), AllreduceAlgo::TwoShot);
  EXPECT_EQ(use_custom_allreduce(512 << 10, 2, true, true), AllreduceAlgo::TwoShot);
}

TEST(CustomAllreduce, EightRanksSwitchToTwoShotAt256KiB) {
  EXPECT_EQ(use_custom_allreduce((256 << 10) - 16, 8, true, true), AllreduceAlgo::OneShot);
  EXPECT_EQ(use_custom_allreduce(256 << 10, 8, true, true), AllreduceAlgo::TwoShot);
}

TEST(CustomAllreduce, AboveEightMiBIsNccl) {
  EXPECT_EQ(use_custom_allreduce(8 << 20, 8, true, true), AllreduceAlgo::TwoShot);
  EXPECT_EQ(use_custom_allreduce((8 << 20) + 16, 8, true, true), AllreduceAlgo::Nccl);
}

TEST(CustomAllreduce, WithoutP2PIsNccl) { EXPECT_EQ(use_custom_allreduce(1024, 4, false, true), AllreduceAlgo::Nccl); }

TEST(CustomAllreduce, DisabledIsNccl) { EXPECT_EQ(use_custom_allreduce(1024, 4, true, false), AllreduceAlgo::Nccl); }

TEST(CustomAllreduce, UnsupportedRankCountsAreNccl) {
  EXPECT_EQ(use_custom_allreduce(1024, 1, true, true), AllreduceAlgo::Nccl);
  EXPECT_EQ(use_custom_allreduce(1024, 3, true, true), AllreduceAlgo::Nccl);
  EXPECT_EQ(use_custom_allreduce(1024, 16, true, true), AllreduceAlgo::Nccl);
}

TEST(CustomAllreduce, SizesNotAMultipleOf16BytesAreNccl) {
  EXPECT_EQ(use_custom_allreduce(1028, 4, true, true), AllreduceAlgo::Nccl);
  EXPECT_EQ(use_custom_allreduce(0, 4, true, true), AllreduceAlgo::Nccl);
}

TEST(GraphBucket, SmallBatchesRoundUpToPowersOfTwo) {
  EXPECT_EQ(graph_bucket(1), 1);
  EXPECT_EQ(graph_bucket(2), 2);
  EXPECT_EQ(graph_bucket(3), 4);
  EXPECT_EQ(graph_bucket(4), 4);
  EXPECT_EQ(graph_bucket(5), 8);
}

TEST(GraphBucket, LargerBatchesRoundUpToMultiplesOfEight) {
  EXPECT_EQ(graph_bucket(9), 16);
  EXPECT_EQ(graph_bucket(17), 24);
  EXPECT_EQ(graph_bucket(24), 24);
  EXPECT_EQ(graph_bucket(255), 256);
  EXPECT_EQ(graph_bucket(256), 256);
}

TEST(GraphBucket, AboveTheLargestBucketIsZero) { EXPECT_EQ(graph_bucket(257), 0); }

TEST(GraphBucket, EmptyBatchUsesTheSmallestBucket) { EXPECT_EQ(graph_bucket(0), 1); }

}  // namespace
}  // namespace tpbatch
