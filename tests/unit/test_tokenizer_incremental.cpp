// IncrementalDetokenizer: streaming text equals one-shot decode; incomplete UTF-8 is held back.
#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace tpbatch {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Tokenizer> load_or_null(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) return nullptr;
  return Tokenizer::load(file);
}

// decode(context + generated) minus decode(context), with context the last 5 prompt ids.
std::string expected_stream(const Tokenizer& tok, const Ids& prompt, const Ids& generated) {
  Ids ctx(prompt.end() - std::min<ptrdiff_t>(5, prompt.size()), prompt.end());
  const std::string head = tok.decode(ctx);
  Ids all = ctx;
  all.insert(all.end(), generated.begin(), generated.end());
  const std::string full = tok.decode(all);
  EXPECT_EQ(full.compare(0, head.size(), head), 0) << full;
  return full.substr(head.size());
}

TEST(TokenizerIncremental, StreamingEqualsOneShotDecodeOnEverySuiteCase) {
  int checked = 0;
  for (const char* folder : {"llama-spm", "gpt-2", "gpt2-vocab-llama3-pretok", "gpt2-vocab-qwen2-pretok"}) {
    const auto dir = test::tokenizers_dir() / folder;
    auto tok = load_or_null(dir / "tokenizer.json");
    ASSERT_TRUE(tok) << dir << " is missing from the clone";
    const Ids prompt = tok->encode("The answer is:", true);
    for (const auto& c : test::read_cases(dir / "cases.jsonl")) {
      IncrementalDetokenizer detok(*tok, prompt);
      std::string streamed;
      for (int32_t id : c.ids) streamed += detok.push(id);
      EXPECT_EQ(streamed, detok.text());
      const std::string expected = expected_stream(*tok, prompt, c.ids);
      EXPECT_EQ(detok.flush_text(), expected) << folder << ": \"" << c.text << "\"";
      // Everything but a held-back incomplete tail is already out.
      EXPECT_EQ(expected.compare(0, streamed.size(), streamed), 0) << folder << ": \"" << c.text << "\"";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

class TokenizerIncrementalStories : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = load_or_null(test::stories_dir() / "tokenizer.json");
    ASSERT_TRUE(tok_) << "the stories260K tokenizer"" is missing from the clone";
  }
  std::unique_ptr<Tokenizer> tok_;
  const Ids prompt_{1, 403, 407, 261, 378};  // <s> Once upon a time
};

TEST_F(TokenizerIncrementalStories, LeadingSpaceAfterPromptContextIsKept) {
  IncrementalDetokenizer detok(*tok_, prompt_);
  const auto ids = tok_->encode("there was", false);  // ▁there ▁was (as pieces)
  std::string out;
  for (int32_t id : ids) out += detok.push(id);
  EXPECT_EQ(out, " there was");
}

TEST_F(TokenizerIncrementalStories, WithoutPromptTheFirstSpaceIsStripped) {
  IncrementalDetokenizer detok(*tok_, {});
  std::string out;
  for (int32_t id : tok_->encode("Once upon", false)) out += detok.push(id);
  EXPECT_EQ(out, "Once upon");
}

TEST_F(TokenizerIncrementalStories, MultiByteCharacterIsHeldBackThenEmittedWhole) {
  IncrementalDetokenizer detok(*tok_, prompt_);
  EXPECT_EQ(detok.push(410), " ");          // "▁"
  EXPECT_EQ(detok.push(3 + 0xE4), "");      // 中 = E4 B8 AD
  EXPECT_EQ(detok.push(3 + 0xB8), "");
  EXPECT_EQ(detok.text(), " ");
  EXPECT_NE(detok.flush_text().find("\xEF\xBF\xBD"), std::string::npos);  // the tail as decode shows it
  EXPECT_EQ(detok.push(3 + 0xAD), "\xE4\xB8\xAD");
  EXPECT_EQ(detok.text(), " \xE4\xB8\xAD");
  EXPECT_EQ(detok.flush_text(), " \xE4\xB8\xAD");
}

TEST_F(TokenizerIncrementalStories, SpecialTokensAreSkipped) {
  IncrementalDetokenizer detok(*tok_, prompt_);
  EXPECT_EQ(detok.push(2), "");  // </s>
  EXPECT_EQ(detok.flush_text(), "");
}

TEST_F(TokenizerIncrementalStories, LongGenerationStreamsExactly) {
  const std::string story = "Once upon a time, there was a little girl named Lily. She loved to play "
                            "outside \xF0\x9F\x98\x81 with her dog, \xE4\xB8\xAD\xE6\x96\x87!";
  const Ids gen = tok_->encode(story, false);
  IncrementalDetokenizer detok(*tok_, prompt_);
  std::string out;
  for (int32_t id : gen) out += detok.push(id);
  EXPECT_EQ(out, expected_stream(*tok_, prompt_, gen));
  EXPECT_EQ(out, " " + story);
}

TEST(TokenizerIncremental, ByteLevelEmojiSplitOverTokensIsHeldBack) {
  auto tok = load_or_null(test::tokenizers_dir() / "gpt-2" / "tokenizer.json");
  ASSERT_TRUE(tok) << "the gpt-2 tokenizer"" is missing from the clone";
  const std::string emoji = "\xF0\x9F\xA6\x99";  // 🦙: several byte-level tokens
  const Ids ids = tok->encode(emoji, false);
  ASSERT_GT(ids.size(), 1u);
  IncrementalDetokenizer detok(*tok, tok->encode("Hi", false));
  for (size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(detok.push(ids[i]), "");
  EXPECT_EQ(detok.push(ids.back()), emoji);
}

}  // namespace
}  // namespace tpbatch
