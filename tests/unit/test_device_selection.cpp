#include "backend/device_selection.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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

TEST(TpGroupGpus, DistinctGpusPass) {
  EXPECT_NO_THROW(check_tp_group_gpus({{0, 0}, {0, 1}, {0, 2}, {0, 3}}, false));
  EXPECT_NO_THROW(check_tp_group_gpus({{0, 0}}, false));
  EXPECT_NO_THROW(check_tp_group_gpus({}, false));
}

TEST(TpGroupGpus, SameDeviceIndexOnDifferentNodesIsFine) {
  EXPECT_NO_THROW(check_tp_group_gpus({{0, 0}, {1, 0}}, false));
}

TEST(TpGroupGpus, TwoRanksOnOneGpuIsAnErrorNamingThemAndTheGpu) {
  try {
    check_tp_group_gpus({{0, 0}, {0, 1}, {0, 1}}, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TP ranks 1 and 2"), std::string::npos) << what;
    EXPECT_NE(what.find("GPU 1 of node 0"), std::string::npos) << what;
    EXPECT_NE(what.find("TPBATCH_ALLOW_SHARED_GPU"), std::string::npos) << what;
  }
}

// --gpus-per-task=1: each rank sees only its own GPU, as device 0.
TEST(TpGroupGpus, RanksSeeingTheirOwnGpuAsDeviceZeroPassByBusId) {
  EXPECT_NO_THROW(check_tp_group_gpus({{0, 0, "0000:41:00.0"}, {0, 0, "0000:42:00.0"}, {0, 0, "0000:c1:00.0"}}, false));
}

// CUDA_VISIBLE_DEVICES ordered differently per rank: one GPU under two indexes.
TEST(TpGroupGpus, OneGpuUnderTwoDeviceIndexesIsAnErrorNamingItsBusId) {
  try {
    check_tp_group_gpus({{0, 0, "0000:41:00.0"}, {0, 1, "0000:41:00.0"}}, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TP ranks 0 and 1"), std::string::npos) << what;
    EXPECT_NE(what.find("GPU 0000:41:00.0 (device 0 to rank 0, 1 to rank 1) of node 0"), std::string::npos) << what;
  }
}

TEST(TpGroupGpus, OneBusIdOnTwoNodesIsTwoGpus) {
  EXPECT_NO_THROW(check_tp_group_gpus({{0, 0, "0000:41:00.0"}, {1, 0, "0000:41:00.0"}}, false));
}

TEST(TpGroupGpus, WithoutBusIdsTheDeviceIndexDecides) {
  EXPECT_FALSE(same_gpu({0, 0, ""}, {0, 1, "0000:41:00.0"}));
  EXPECT_TRUE(same_gpu({0, 1, ""}, {0, 1, "0000:41:00.0"}));
  EXPECT_TRUE(same_gpu({0, 1, "0000:41:00.0"}, {0, 3, "0000:41:00.0"}));
  EXPECT_FALSE(same_gpu({0, 1, "0000:41:00.0"}, {0, 1, "0000:42:00.0"}));
}

TEST(TpGroupGpus, TheOverrideAllowsSharing) { EXPECT_NO_THROW(check_tp_group_gpus({{0, 0}, {0, 0}}, true)); }

TEST(TpGroupGpus, OverrideComesFromTheEnvironment) {
  const char* old = std::getenv("TPBATCH_ALLOW_SHARED_GPU");
  const std::string saved = old ? old : "";
  setenv("TPBATCH_ALLOW_SHARED_GPU", "1", 1);
  EXPECT_TRUE(shared_gpu_allowed_by_env());
  setenv("TPBATCH_ALLOW_SHARED_GPU", "0", 1);
  EXPECT_FALSE(shared_gpu_allowed_by_env());
  unsetenv("TPBATCH_ALLOW_SHARED_GPU");
  EXPECT_FALSE(shared_gpu_allowed_by_env());
  if (old) setenv("TPBATCH_ALLOW_SHARED_GPU", saved.c_str(), 1);
}

TEST(ChooseBackend, CpuStaysCpuEvenWithGpus) { EXPECT_EQ(choose_backend(BackendKind::kCpu, true), BackendKind::kCpu); }

TEST(ChooseBackend, AutoPicksCudaWhenEveryRankHasAGpu) {
  EXPECT_EQ(choose_backend(std::nullopt, true), BackendKind::kCuda);
}

TEST(ChooseBackend, AutoFallsBackToCpuWhenSomeRankLacksAGpu) {
  EXPECT_EQ(choose_backend(std::nullopt, false), BackendKind::kCpu);
}

TEST(ChooseBackend, CudaWithGpusIsCuda) { EXPECT_EQ(choose_backend(BackendKind::kCuda, true), BackendKind::kCuda); }

TEST(ChooseBackend, CudaWithoutGpusIsAJobErrorNamingTheProblem) {
  try {
    choose_backend(BackendKind::kCuda, false);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
    EXPECT_NE(std::string(e.what()).find("CUDA GPU"), std::string::npos) << e.what();
  }
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
