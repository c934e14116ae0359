#include <gtest/gtest.h>
#include "common/error.h"
TEST(Error, CarriesExitCode) { EXPECT_EQ(tpbatch::JobError("x").exit_code(), 2); }
