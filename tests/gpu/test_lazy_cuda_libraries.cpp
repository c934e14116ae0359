// The real CUDA backend opens cuBLAS and NCCL on its first call into them (src/backend/cuda/
// libraries/): a process that never calls them (every CPU run) maps neither. These need no GPU:
// the calls below answer without a device. Each test runs in a process of its own (ctest), so the
// library is not loaded before it; run together in one process, a later test is skipped.
#if !defined(TPBATCH_CUDA_EMULATED)
#include <cublas_v2.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <string>

namespace {

#define TPBATCH_STR2(x) #x
#define TPBATCH_STR(x) TPBATCH_STR2(x)
const std::string kNcclSoname = "libnccl.so." TPBATCH_STR(NCCL_MAJOR);
const std::string kCublasSoname = "libcublas.so." TPBATCH_STR(CUBLAS_VER_MAJOR);

bool loaded(const std::string& soname) { return dlopen(soname.c_str(), RTLD_NOW | RTLD_NOLOAD) != nullptr; }

TEST(LazyCudaLibraries, NcclIsOpenedByItsFirstCall) {
  if (loaded(kNcclSoname)) GTEST_SKIP() << "an earlier test in this process called NCCL";
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version / 10000, NCCL_MAJOR) << "version " << version;
  EXPECT_TRUE(loaded(kNcclSoname));
  EXPECT_STREQ(ncclGetErrorString(ncclSuccess), "no error");
}

TEST(LazyCudaLibraries, CublasIsOpenedByItsFirstCall) {
  if (loaded(kCublasSoname)) GTEST_SKIP() << "an earlier test in this process called cuBLAS";
  const char* text = cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED);  // the library's own words
  ASSERT_NE(text, nullptr);
  EXPECT_NE(std::string(text), "");
  EXPECT_TRUE(loaded(kCublasSoname));
}

}  // namespace
#endif
