// Score rows tokenized as lm-evaluation-harness does (HFLM._encode_pair), on the real Llama-2
// tokenizer: the continuation's tokens are those of encode(context + continuation) after the
// context's own tokens, with the context's trailing whitespace moved into the continuation.
#include <gtest/gtest.h>

#include "engine/score_tokens.h"
#include "tokenizer_test_util.h"

using namespace tpbatch;

namespace {

class LmEvalSplit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = test::tokenizers_dir() / "llama-spm/tokenizer.json";
    tok_ = Tokenizer::load(path).release();
  }
  void SetUp() override {
    ASSERT_TRUE(tok_) << "the Llama-2 tokenizer"" is missing from the clone";
  }
  std::vector<std::string> pieces(const std::vector<int32_t>& ids) {
    std::vector<std::string> out;
    for (int32_t id : ids) out.push_back(tok_->id_to_token(id));
    return out;
  }
  static Tokenizer* tok_;
};
Tokenizer* LmEvalSplit::tok_ = nullptr;

}  // namespace

TEST_F(LmEvalSplit, LeadingSpaceWordIsOneTokenAsInTheWholeSentence) {
  ScoreTokens st = lm_eval_score_tokens(*tok_, "The capital of France is", " Paris", true);
  EXPECT_EQ(st.context, tok_->encode("The capital of France is", true));
  EXPECT_EQ(pieces(st.continuation), (std::vector<std::string>{"▁Paris"}));
  // The old, separate tokenization scores a stray "▁" first: that is what the option keeps.
  EXPECT_EQ(pieces(tok_->encode(" Paris", false)), (std::vector<std::string>{"▁", "▁Paris"}));
  // Context + continuation is exactly the whole sentence's encoding here.
  std::vector<int32_t> joined = st.context;
  joined.insert(joined.end(), st.continuation.begin(), st.continuation.end());
  EXPECT_EQ(joined, tok_->encode("The capital of France is Paris", true));
}

TEST_F(LmEvalSplit, TrailingWhitespaceOfTheContextMovesToTheContinuation) {
  const ScoreTokens a = lm_eval_score_tokens(*tok_, "The capital of France is ", "Paris", true);
  const ScoreTokens b = lm_eval_score_tokens(*tok_, "The capital of France is", " Paris", true);
  EXPECT_EQ(a.context, b.context);
  EXPECT_EQ(a.continuation, b.continuation);
  // Several whitespace characters, a newline and a no-break space (U+00A0, Python's isspace) too.
  const ScoreTokens c = lm_eval_score_tokens(*tok_, "Answer:\n \xC2\xA0", "yes", true);
  const ScoreTokens d = lm_eval_score_tokens(*tok_, "Answer:", "\n \xC2\xA0yes", true);
  EXPECT_EQ(c.context, tok_->encode("Answer:", true));
  EXPECT_EQ(c.context, d.context);
  EXPECT_EQ(c.continuation, d.continuation);
}

TEST_F(LmEvalSplit, ContinuationIsTheTailOfTheJointEncoding) {
  for (auto [ctx, cont] : std::vector<std::pair<std::string, std::string>>{
           {"Question: What is 2+2?\nAnswer:", " 4"},
           {"Once upon a time", ", there was a little girl named Lily."},
           {"The word is un", "believable"},  // the boundary falls inside a word
           {"Zoë and Fran", "çois went to the fête 🎉"}}) {
    const ScoreTokens st = lm_eval_score_tokens(*tok_, ctx, cont, true);
    const std::vector<int32_t> whole = tok_->encode(ctx + cont, true);
    ASSERT_GE(whole.size(), st.context.size()) << ctx;
    EXPECT_EQ(st.context, tok_->encode(ctx, true)) << ctx;
    EXPECT_EQ(st.continuation, std::vector<int32_t>(whole.begin() + st.context.size(), whole.end())) << ctx;
    EXPECT_FALSE(st.continuation.empty()) << ctx;
  }
}

TEST_F(LmEvalSplit, EmptyContextIsJustBos) {
  const ScoreTokens st = lm_eval_score_tokens(*tok_, "", "Once upon a time", true);
  EXPECT_EQ(st.context, (std::vector<int32_t>{1}));
  const std::vector<int32_t> whole = tok_->encode("Once upon a time", true);
  EXPECT_EQ(st.continuation, std::vector<int32_t>(whole.begin() + 1, whole.end()));
  // All whitespace: everything moves to the continuation.
  const ScoreTokens ws = lm_eval_score_tokens(*tok_, "  ", "Hi", true);
  EXPECT_EQ(ws.context, (std::vector<int32_t>{1}));
}

TEST_F(LmEvalSplit, WithoutBos) {
  const ScoreTokens st = lm_eval_score_tokens(*tok_, "The capital of France is", " Paris", false);
  EXPECT_EQ(st.context, tok_->encode("The capital of France is", false));
  EXPECT_EQ(pieces(st.continuation), (std::vector<std::string>{"▁Paris"}));
}
