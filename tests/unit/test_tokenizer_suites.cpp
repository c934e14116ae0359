// The four tokenizer suites of tests/data/ (tokenizer.json + HF-made ids): every case must match exactly.
#include <gtest/gtest.h>

#include <thread>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tpbatch {
namespace {

struct Suite {
  const char* folder;
  std::vector<int32_t> bos;  // what add_special_tokens=true prepends
};

class TokenizerSuite : public ::testing::TestWithParam<Suite> {
 protected:
  void SetUp() override {
    dir_ = test::tokenizers_dir() / GetParam().folder;
    if (!std::filesystem::exists(dir_ / "tokenizer.json") || !std::filesystem::exists(dir_ / "cases.jsonl"))
      GTEST_FAIL() << dir_ << " is missing from the clone";
    tok_ = Tokenizer::load(dir_ / "tokenizer.json");
    cases_ = test::read_cases(dir_ / "cases.jsonl");
    ASSERT_EQ(cases_.size(), 46u);
  }
  std::filesystem::path dir_;
  std::unique_ptr<Tokenizer> tok_;
  std::vector<test::TokCase> cases_;
};

TEST_P(TokenizerSuite, EncodesEveryCaseExactly) {
  int passed = 0;
  for (const auto& c : cases_) {
    auto ids = tok_->encode(c.text, c.add_special_tokens);
    EXPECT_EQ(ids, c.ids) << "text: \"" << c.text << "\"";
    passed += ids == c.ids;
  }
  EXPECT_EQ(passed, static_cast<int>(cases_.size()));
}

TEST_P(TokenizerSuite, AddSpecialTokensPrependsOnlyTheTemplateBos) {
  for (const auto& c : cases_) {
    std::vector<int32_t> expected = GetParam().bos;
    expected.insert(expected.end(), c.ids.begin(), c.ids.end());
    EXPECT_EQ(tok_->encode(c.text, true), expected) << "text: \"" << c.text << "\"";
  }
}

TEST_P(TokenizerSuite, DecodeRoundTripsEveryCase) {
  for (const auto& c : cases_) EXPECT_EQ(tok_->decode(c.ids), c.text);
}

TEST_P(TokenizerSuite, DecodeSkipsTheBosUnlessAsked) {
  for (const auto& c : cases_) {
    auto ids = tok_->encode(c.text, true);
    EXPECT_EQ(tok_->decode(ids), c.text);
  }
}

TEST_P(TokenizerSuite, TokenIdMapsAreInverse) {
  for (const auto& c : cases_)
    for (int32_t id : c.ids) {
      auto piece = tok_->id_to_token(id);
      ASSERT_FALSE(piece.empty()) << id;
      EXPECT_EQ(tok_->token_to_id(piece), id);
    }
  EXPECT_EQ(tok_->id_to_token(-1), "");
  EXPECT_EQ(tok_->id_to_token(tok_->vocab_size()), "");
}

TEST_P(TokenizerSuite, ConcurrentEncodesAgree) {
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round)
        for (const auto& c : cases_) mismatches[t] += tok_->encode(c.text, c.add_special_tokens) != c.ids;
    });
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

INSTANTIATE_TEST_SUITE_P(Shared, TokenizerSuite,
                         ::testing::Values(Suite{"llama-spm", {1}}, Suite{"gpt-2", {}},
                                           Suite{"gpt2-vocab-llama3-pretok", {50256}},
                                           Suite{"gpt2-vocab-qwen2-pretok", {}}),
                         [](const auto& info) {
                           std::string n = info.param.folder;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace tpbatch
