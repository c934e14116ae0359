// The emulated device's own specification: each bug it exists to catch, planted in a small
// program beside its correct twin. The twin must pass and the bug must be diagnosed -- with the
// diagnosis the emulator promises (cuemu/README.md), so a change that stops diagnosing one fails
// here. Built three times (plain, AddressSanitizer + UBSan, ThreadSanitizer); a bug that only a
// sanitizer can see is checked in that build and reported skipped in the others.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <cstring>
#include <vector>

#include "planted_kernels.h"

namespace {

#if defined(CUEMU_TEST_ASAN)
constexpr bool kAsan = true, kTsan = false;
#elif defined(CUEMU_TEST_TSAN)
constexpr bool kAsan = false, kTsan = true;
#else
constexpr bool kAsan = false, kTsan = false;
#endif

class PlantedBugs : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");  // the emulator runs threads; re-exec, never fork
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override { cudaStreamDestroy(stream_); }

  float* device_floats(const std::vector<float>& v) {
    float* d = nullptr;
    EXPECT_EQ(cudaMalloc(&d, v.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(d, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  std::vector<float> host_floats(const float* d, size_t n) {
    std::vector<float> v(n);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  }
  std::vector<float> ramp(size_t n) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 251) - 100.0f;
    return v;
  }

  cudaStream_t stream_ = nullptr;
};

// ---- device side ----------------------------------------------------------------------------

TEST_F(PlantedBugs, BarrierBeforeReusingSharedMemoryGivesTheRightValues) {
  const std::vector<float> in = ramp(4 * 256);
  float* d_in = device_floats(in);
  float* d_out = device_floats(std::vector<float>(in.size()));
  planted::reverse_twice(d_in, d_out, 4, true, stream_);
  const std::vector<float> out = host_floats(d_out, in.size());
  for (size_t i = 0; i < in.size(); ++i) ASSERT_EQ(out[i], 2.0f * in[i]) << "at " << i;
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST_F(PlantedBugs, MissingBarrierBeforeReusingSharedMemoryIsCaught) {
  const std::vector<float> in = ramp(4 * 256);
  float* d_in = device_floats(in);
  float* d_out = device_floats(std::vector<float>(in.size()));
  if (kTsan) {
    // ThreadSanitizer names the racing write and read, in the .cu file.
    EXPECT_DEATH(
        {
          planted::reverse_twice(d_in, d_out, 4, false, stream_);
          cudaStreamSynchronize(stream_);
        },
        "data race(.|\n)*planted_kernels.cu");
    return;
  }
  // Threads run until they wait: the first ones overwrite values the last ones have yet to read.
  planted::reverse_twice(d_in, d_out, 4, false, stream_);
  const std::vector<float> out = host_floats(d_out, in.size());
  size_t wrong = 0;
  for (size_t i = 0; i < in.size(); ++i) wrong += out[i] != 2.0f * in[i];
  EXPECT_GT(wrong, 0u) << "a missing __syncthreads went unnoticed";
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST_F(PlantedBugs, SharedLoadInsideTheAllocationSums) {
  const std::vector<float> in = ramp(100);
  float* d_in = device_floats(in);
  float* d_out = device_floats({0.0f});
  planted::shared_sum(d_in, d_out, 100, false, stream_);
  float want = 0.0f;
  for (float v : in) want += v;
  EXPECT_EQ(host_floats(d_out, 1)[0], want);
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST_F(PlantedBugs, SharedLoadOnePastTheEndIsCaughtByAddressSanitizer) {
  if (!kAsan) GTEST_SKIP() << "an overrun inside the emulator's memory is seen by AddressSanitizer only";
  float* d_in = device_floats(ramp(100));
  float* d_out = device_floats({0.0f});
  EXPECT_DEATH(
      {
        planted::shared_sum(d_in, d_out, 100, true, stream_);
        cudaStreamSynchronize(stream_);
      },
      "buffer-overflow(.|\n)*planted_kernels.cu");
}

TEST_F(PlantedBugs, WarpShuffleInAWholeWarpBlockSums) {
  const std::vector<float> in = ramp(256);
  float* d_in = device_floats(in);
  float* d_out = device_floats({0.0f});
  planted::warp_sum(d_in, d_out, 256, stream_);
  double want = 0.0;
  for (float v : in) want += v;
  EXPECT_EQ(host_floats(d_out, 1)[0], static_cast<float>(want));
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST_F(PlantedBugs, FullMaskShuffleInABlockOf200ThreadsIsCaught) {
  float* d_in = device_floats(ramp(200));
  float* d_out = device_floats({0.0f});
  EXPECT_DEATH(
      {
        planted::warp_sum(d_in, d_out, 200, stream_);
        cudaStreamSynchronize(stream_);
      },
      "mask 0xffffffff names lanes beyond the block's threads");
}

TEST_F(PlantedBugs, LaunchOfMoreThan1024ThreadsSetsTheStickyError) {
  float* d_in = device_floats(ramp(2048));
  float* d_out = device_floats({0.0f});
  cudaGetLastError();
  planted::warp_sum(d_in, d_out, 2048, stream_);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "cudaGetLastError clears the error";
}

TEST_F(PlantedBugs, UnwrittenDeviceMemoryReadsAsNaN) {
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64 * sizeof(float)), cudaSuccess);
  const std::vector<float> v = host_floats(d, 64);
  for (float x : v) ASSERT_TRUE(std::isnan(x));
  cudaFree(d);
}

// ---- cuBLAS: row-major y[m,n] = x[m,k] w[n,k]^T, as the CUDA backend calls it ----------------

class PlantedGemm : public PlantedBugs {
 protected:
  void SetUp() override {
    PlantedBugs::SetUp();
    ASSERT_EQ(cublasCreate(&handle_), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasSetStream(handle_, stream_), CUBLAS_STATUS_SUCCESS);
    hx_ = ramp(m_ * k_);
    hw_ = ramp(n_ * k_ + 7);
    hw_.resize(n_ * k_);
    x_ = device_floats(hx_);
    w_ = device_floats(hw_);
    y_ = device_floats(std::vector<float>(m_ * n_));
  }
  void TearDown() override {
    cudaFree(x_);
    cudaFree(w_);
    cudaFree(y_);
    cublasDestroy(handle_);
    PlantedBugs::TearDown();
  }
  cublasStatus_t gemm(cublasOperation_t ta, cublasOperation_t tb, int ldc) {
    const float one = 1.0f, zero = 0.0f;
    return cublasGemmEx(handle_, ta, tb, n_, m_, k_, &one, w_, CUDA_R_32F, k_, x_, CUDA_R_32F, k_, &zero, y_,
                        CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  }
  const int m_ = 8, n_ = 16, k_ = 32;
  cublasHandle_t handle_ = nullptr;
  std::vector<float> hx_, hw_;
  float *x_ = nullptr, *w_ = nullptr, *y_ = nullptr;
};

TEST_F(PlantedGemm, TransposedWeightsGiveTheRowMajorProduct) {
  ASSERT_EQ(gemm(CUBLAS_OP_T, CUBLAS_OP_N, n_), CUBLAS_STATUS_SUCCESS);
  const std::vector<float> y = host_floats(y_, m_ * n_);
  for (int i = 0; i < m_; ++i)
    for (int j = 0; j < n_; ++j) {
      double want = 0.0;
      for (int p = 0; p < k_; ++p) want += double(hx_[i * k_ + p]) * hw_[j * k_ + p];
      ASSERT_EQ(y[i * n_ + j], static_cast<float>(want)) << i << "," << j;
    }
}

TEST_F(PlantedGemm, SwappedTransposesAreRefusedNamingTheOperand) {
  testing::internal::CaptureStderr();
  const cublasStatus_t s = gemm(CUBLAS_OP_N, CUBLAS_OP_T, n_);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s, CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_NE(err.find("A outside device memory"), std::string::npos) << err;
}

TEST_F(PlantedGemm, LeadingDimensionBelowTheRowsIsRefused) {
  testing::internal::CaptureStderr();
  const cublasStatus_t s = gemm(CUBLAS_OP_T, CUBLAS_OP_N, n_ - 1);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(s, CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_NE(err.find("leading dimension too small"), std::string::npos) << err;
}

// ---- host/device ordering (lazy streams: queued copies run only when the host waits) ------------

// Uploads 4 chunks of 256 floats through two pinned staging buffers in turn, as the CUDA backend's
// upload does; `wait_for_previous_copy` false refills a staging buffer without waiting for the
// copy that still reads it.
class LazyStreams : public PlantedBugs {
 protected:
  void SetUp() override {
    const char* m = std::getenv("CUEMU_MODE");
    if (m && std::string(m) != "lazy") GTEST_SKIP() << "shows deterministically with lazy streams only";
    PlantedBugs::SetUp();
  }
};

class PlantedUpload : public LazyStreams {
 protected:
  std::vector<float> upload(bool wait_for_previous_copy) {
    constexpr size_t kChunk = 256;
    const std::vector<float> src = ramp(4 * kChunk);
    float* dev = device_floats(std::vector<float>(src.size()));
    void* pinned[2];
    cudaEvent_t copied[2];
    for (int i = 0; i < 2; ++i) {
      cudaMallocHost(&pinned[i], kChunk * sizeof(float));
      cudaEventCreateWithFlags(&copied[i], cudaEventDisableTiming);
    }
    for (size_t c = 0; c < 4; ++c) {
      const int i = static_cast<int>(c % 2);
      if (wait_for_previous_copy && c >= 2) cudaEventSynchronize(copied[i]);
      std::memcpy(pinned[i], src.data() + c * kChunk, kChunk * sizeof(float));
      cudaMemcpyAsync(dev + c * kChunk, pinned[i], kChunk * sizeof(float), cudaMemcpyHostToDevice, stream_);
      cudaEventRecord(copied[i], stream_);
    }
    std::vector<float> out = host_floats(dev, src.size());
    for (int i = 0; i < 2; ++i) {
      cudaFreeHost(pinned[i]);
      cudaEventDestroy(copied[i]);
    }
    cudaFree(dev);
    wrong_ = 0;
    for (size_t i = 0; i < src.size(); ++i) wrong_ += out[i] != src[i];
    return out;
  }
  size_t wrong_ = 0;
};

TEST_F(PlantedUpload, WaitingForAPinnedChunksCopyBeforeRefillingItKeepsTheData) {
  upload(true);
  EXPECT_EQ(wrong_, 0u);
}

TEST_F(PlantedUpload, RefillingAPinnedChunkBeforeItsCopyRanCorruptsTheData) {
  upload(false);
  EXPECT_GT(wrong_, 0u) << "a pinned buffer refilled under a pending copy went unnoticed";
}

// Downloads through a pinned stage; `wait` false reads the stage before the copy is known done.
class PlantedDownload : public LazyStreams {
 protected:
  std::vector<float> download(bool wait) {
    const std::vector<float> src = ramp(256);
    float* dev = device_floats(src);
    float* stage = nullptr;
    cudaMallocHost(reinterpret_cast<void**>(&stage), src.size() * sizeof(float));
    cudaMemcpyAsync(stage, dev, src.size() * sizeof(float), cudaMemcpyDeviceToHost, stream_);
    if (wait) cudaStreamSynchronize(stream_);
    std::vector<float> got(stage, stage + src.size());
    cudaStreamSynchronize(stream_);
    cudaFreeHost(stage);
    cudaFree(dev);
    return got;
  }
};

TEST_F(PlantedDownload, ReadingThePinnedStageAfterTheStreamWaitSeesTheData) {
  const std::vector<float> got = download(true);
  const std::vector<float> want = ramp(256);
  EXPECT_EQ(got, want);
}

TEST_F(PlantedDownload, ReadingThePinnedStageBeforeTheStreamWaitSeesNaN) {
  const std::vector<float> got = download(false);
  EXPECT_TRUE(std::isnan(got[0])) << "a download read before its copy ran went unnoticed";
}

}  // namespace
