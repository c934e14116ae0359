// common/log.h: every line starts with the UTC time and, in a run, the rank.
#include <gtest/gtest.h>

#include <regex>

#include "common/log.h"

namespace tpbatch {
namespace {

TEST(LogPrefix, IsTheUtcTimeThenTheRankOnceARankIsSet) {
  set_log_rank(3);
  EXPECT_TRUE(std::regex_match(log_prefix(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[rank 3\] )")))
      << log_prefix();
  set_log_rank(-1);
}

TEST(LogPrefix, IsTheUtcTimeAloneWithoutARank) {
  set_log_rank(-1);
  EXPECT_TRUE(std::regex_match(log_prefix(), std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ )"))) << log_prefix();
}

TEST(LogLines, CarryThePrefixTheTagAndOneNewline) {
  set_log_rank(0);
  testing::internal::CaptureStderr();
  log_info("KV cache: %d tokens", 16);
  log_warning("careful");
  log_error("broken %s", "thing");
  const std::string out = testing::internal::GetCapturedStderr();
  set_log_rank(-1);
  const std::string time = R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[rank 0\] )";
  EXPECT_TRUE(std::regex_match(out, std::regex(time + R"(\[tpbatch\] KV cache: 16 tokens\n)" + time +
                                               R"(\[tpbatch\] warning: careful\n)" + time +
                                               R"(tpbatch: error: broken thing\n)")))
      << out;
}

}  // namespace
}  // namespace tpbatch
