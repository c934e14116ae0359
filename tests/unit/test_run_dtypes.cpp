// The dtype rule that `run` applies and `plan` predicts with: weights, KV cache and activations
// from the job's dtype choices, the checkpoint's storage dtype and the device.
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "model/run_dtypes.h"

using namespace tpbatch;

namespace {

JobSpec job(DTypeChoice dtype, DTypeChoice kv = DTypeChoice::kAuto) {
  JobSpec j;
  j.dtype = dtype;
  j.engine.kv_cache_dtype = kv;
  return j;
}

DType bf16_checkpoint() { return DType::BF16; }

}  // namespace

TEST(RunDtypes, AutoWeightsKeepTheCheckpointDtype) {
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto), bf16_checkpoint, false).weights, DType::BF16);
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto), [] { return DType::F16; }, true).weights, DType::F16);
}

TEST(RunDtypes, AChosenWeightDtypeWinsWithoutReadingTheCheckpoint) {
  bool asked = false;
  const auto checkpoint = [&] {
    asked = true;
    return DType::BF16;
  };
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kFloat32), checkpoint, false).weights, DType::F32);
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kFloat16), checkpoint, true).weights, DType::F16);
  EXPECT_FALSE(asked);
}

TEST(RunDtypes, AutoKvCacheIsFloat32OnTheCpuAndBfloat16OnCuda) {
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto), bf16_checkpoint, false).kv_cache, DType::F32);
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto), bf16_checkpoint, true).kv_cache, DType::BF16);
}

TEST(RunDtypes, AChosenKvCacheDtypeHoldsOnEveryDevice) {
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto, DTypeChoice::kBFloat16), bf16_checkpoint, false).kv_cache, DType::BF16);
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto, DTypeChoice::kFloat32), bf16_checkpoint, true).kv_cache, DType::F32);
}

TEST(RunDtypes, CpuActivationsAreTheCpuBackendsOwn) {
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto), bf16_checkpoint, false).activations,
            make_cpu_backend()->activation_dtype());
  EXPECT_EQ(run_dtypes(job(DTypeChoice::kAuto), bf16_checkpoint, true).activations, DType::BF16);
}
