// What the launcher's environment says: started by mpirun / srun with PMI or PMIx or not, and the
// job's size; a size without a launcher's rank variables (srun without PMI, a batch script) is a
// lone process.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "comm/launcher_env.h"

namespace tpbatch {
namespace {

const char* const kVars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_FD",
                             "PMI_SIZE",             "PMIX_SIZE", "SLURM_NTASKS"};

// Clears the launcher variables for the test's life and puts the process's own back after.
class LauncherEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    for (const auto& [k, v] : saved_) setenv(k.c_str(), v.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> saved_;
};

TEST_F(LauncherEnv, AShellStartIsOneProcess) {
  EXPECT_FALSE(started_by_a_launcher());
  EXPECT_EQ(launched_world_size(), 1);
}

TEST_F(LauncherEnv, MpirunGivesTheWorldSize) {
  setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
  EXPECT_TRUE(started_by_a_launcher());
  EXPECT_EQ(launched_world_size(), 8);
}

TEST_F(LauncherEnv, SrunWithPmixTakesTheSizeFromSlurm) {
  setenv("PMIX_RANK", "3", 1);
  setenv("SLURM_NTASKS", "4", 1);
  EXPECT_TRUE(started_by_a_launcher());
  EXPECT_EQ(launched_world_size(), 4);
}

TEST_F(LauncherEnv, ASlurmSizeWithoutALauncherRankIsOneProcess) {
  setenv("SLURM_NTASKS", "16", 1);
  EXPECT_FALSE(started_by_a_launcher());
  EXPECT_EQ(launched_world_size(), 1);
}

}  // namespace
}  // namespace tpbatch
