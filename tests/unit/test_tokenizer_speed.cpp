// A sanity bound, not a benchmark: a 1 MB English document tokenizes in well under 2 s.
#include <gtest/gtest.h>

#include <chrono>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tpbatch {
namespace {

std::string megabyte_of_english() {
  const std::string paragraph =
      "Once upon a time, in a small village by the sea, there lived an old fisherman named Tom. "
      "Every morning he rowed his little boat past the rocks, counting 17 gulls and 3 seals, and "
      "every evening he told the children what he'd seen. \"The sea is never the same twice,\" he "
      "said; the children laughed, but they remembered it for the rest of their lives.\n\n";
  std::string text;
  int k = 0;
  while (text.size() < (1u << 20)) text += paragraph + std::to_string(k++) + " ";
  return text;
}

class TokenizerSpeed : public ::testing::TestWithParam<const char*> {};

TEST_P(TokenizerSpeed, OneMegabyteInUnderTwoSeconds) {
  const auto file = test::tokenizers_dir() / GetParam() / "tokenizer.json";
  if (!std::filesystem::exists(file)) GTEST_FAIL() << file << " is missing from the clone";
  auto tok = Tokenizer::load(file);
  const std::string text = megabyte_of_english();
  const auto t0 = std::chrono::steady_clock::now();
  const auto ids = tok->encode(text, false);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 2.0);
  EXPECT_GT(ids.size(), 100000u);
  EXPECT_EQ(tok->decode(ids), text);
}

INSTANTIATE_TEST_SUITE_P(Shared, TokenizerSpeed,
                         ::testing::Values("llama-spm", "gpt-2", "gpt2-vocab-llama3-pretok", "gpt2-vocab-qwen2-pretok"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace tpbatch
