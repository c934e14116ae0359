// The stories260K tokenizer (Llama-2 layout, 512 tokens, byte fallback); ids from HF tokenizers.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tpbatch {
namespace {

class TokenizerStories : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto file = test::stories_dir() / "tokenizer.json";
    if (!std::filesystem::exists(file)) GTEST_FAIL() << file << " is missing from the clone";
    tok_ = Tokenizer::load(file);
  }
  std::unique_ptr<Tokenizer> tok_;
};

using Ids = std::vector<int32_t>;

TEST_F(TokenizerStories, EncodesOnceUponATimeWithBos) {
  EXPECT_EQ(tok_->encode("Once upon a time"), (Ids{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok_->encode("Once upon a time", false), (Ids{403, 407, 261, 378}));
}

TEST_F(TokenizerStories, EmptyTextIsJustBos) {
  EXPECT_EQ(tok_->encode(""), (Ids{1}));
  EXPECT_EQ(tok_->encode("", false), Ids{});
}

TEST_F(TokenizerStories, VocabSizeIs512) { EXPECT_EQ(tok_->vocab_size(), 512); }

TEST_F(TokenizerStories, EmojiAndChineseUseByteFallback) {
  const std::string text = "I like \xF0\x9F\xA6\x99 and \xE4\xB8\xAD\xE6\x96\x87";  // 🦙, 中文
  const Ids expected{1, 359, 397, 354, 410, 243, 162, 169, 156, 269, 410, 231, 187, 176, 233, 153, 138};
  EXPECT_EQ(tok_->encode(text), expected);
  for (int32_t id : Ids{243, 162, 169, 156, 231, 187, 176, 233, 153, 138}) {
    EXPECT_GE(id, 3);
    EXPECT_LE(id, 258);
  }
  EXPECT_EQ(tok_->decode(expected), text);
}

TEST_F(TokenizerStories, SpecialTokenTextInPromptBecomesItsId) {
  EXPECT_EQ(tok_->encode("Hello<s>world"), (Ids{1, 346, 306, 414, 1, 263, 304, 341}));
  EXPECT_EQ(tok_->encode("a </s> b <unk>", false), (Ids{261, 410, 2, 410, 268, 410, 0}));
}

TEST_F(TokenizerStories, DecodeSkipsSpecialTokensByDefault) {
  const Ids ids{1, 346, 306, 414, 1, 263, 304, 341};
  EXPECT_EQ(tok_->decode(ids), "Hello world");
  EXPECT_EQ(tok_->decode(ids, false), "<s> Hello<s> world");
  EXPECT_TRUE(tok_->is_special(1));
  EXPECT_FALSE(tok_->is_special(403));
}

TEST_F(TokenizerStories, RoundTripsText) {
  for (std::string text : {"Once upon a time, there was a little girl named Lily.", "  two  spaces ",
                           "\xC3\xBF", "Tabs\tand\nnewlines\n\n", "\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x81!"}) {
    EXPECT_EQ(tok_->decode(tok_->encode(text)), text);
  }
}

TEST_F(TokenizerStories, InvalidUtf8GoesThroughByteFallback) {
  const std::string text = "ab\xFF\xC3(\x80z";
  const auto ids = tok_->encode(text, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 3 + 0xFF), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 3 + 0xC3), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 3 + 0x80), 1);
  // Decoding gives valid UTF-8 with U+FFFD for each invalid byte, as HF's ByteFallback does.
  EXPECT_EQ(tok_->decode(ids), "ab\xEF\xBF\xBD\xEF\xBF\xBD(\xEF\xBF\xBDz");
}

}  // namespace
}  // namespace tpbatch
