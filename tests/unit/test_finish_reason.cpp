// FinishReason: the names /finish_reason stores, read back to the same reason, and export's OpenAI names.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/finish_reason.h"

using namespace tpbatch;

namespace {
const std::vector<std::pair<FinishReason, std::string>> kStored = {
    {FinishReason::kLength, "length"}, {FinishReason::kEos, "eos"},           {FinishReason::kStop, "stop"},
    {FinishReason::kScored, "scored"}, {FinishReason::kEmbedded, "embedded"}, {FinishReason::kError, "error"}};
}  // namespace

TEST(FinishReason, StoredNamesAreTheResultsFileStrings) {
  for (const auto& [reason, name] : kStored) EXPECT_EQ(finish_reason_name(reason), name);
}

TEST(FinishReason, EveryStoredNameParsesBackToItsReason) {
  for (const auto& [reason, name] : kStored) EXPECT_EQ(parse_finish_reason(name), reason) << name;
}

TEST(FinishReason, NoReasonIsTheEmptyName) {
  EXPECT_EQ(finish_reason_name(std::nullopt), "");
  ASSERT_NE(finish_reason_name(std::nullopt).data(), nullptr);  // the results file writes it as a C string
  EXPECT_EQ(*finish_reason_name(std::nullopt).data(), '\0');
  EXPECT_EQ(parse_finish_reason(""), std::nullopt);
}

TEST(FinishReason, AnUnknownNameParsesToNone) {
  EXPECT_EQ(parse_finish_reason("Length"), std::nullopt);
  EXPECT_EQ(parse_finish_reason("done"), std::nullopt);
}

TEST(FinishReason, OpenAiCallsEosAndStopBothStop) {
  EXPECT_EQ(openai_finish_reason(FinishReason::kEos), "stop");
  EXPECT_EQ(openai_finish_reason(FinishReason::kStop), "stop");
  EXPECT_EQ(openai_finish_reason(FinishReason::kLength), "length");
  EXPECT_EQ(openai_finish_reason(FinishReason::kError), "error");
  EXPECT_EQ(openai_finish_reason(std::nullopt), "");
}
