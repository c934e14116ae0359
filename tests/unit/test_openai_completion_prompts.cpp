// A /v1/completions request's body.prompt: a string or a list of token ids, alone or as the one
// element of a list; several prompts in one request line are refused with a reason.
#include <gtest/gtest.h>

#include "io/input_row.h"

using namespace tpbatch;

namespace {

std::string request(const std::string& prompt) {
  return R"({"custom_id": "p", "method": "POST", "url": "/v1/completions", "body": {"prompt": )" + prompt + "}}";
}

InputRow row(const std::string& prompt) { return parse_input_row(request(prompt), 0, JobSpec{}, 512); }

std::string bad(const std::string& prompt) {
  try {
    parse_input_row(request(prompt), 6, JobSpec{}, 512);
  } catch (const BadLine& b) {
    return b.reason;
  }
  ADD_FAILURE() << "accepted: " << prompt;
  return "";
}

}  // namespace

TEST(OpenAiCompletionPrompt, AStringOrAListOfOneStringIsTheText) {
  EXPECT_EQ(row(R"("Once")").text.value(), "Once");
  EXPECT_EQ(row(R"(["Once"])").text.value(), "Once");
  EXPECT_FALSE(row(R"(["Once"])").tokens.has_value());
}

TEST(OpenAiCompletionPrompt, AListOfTokenIdsIsThePromptAsItIs) {
  const InputRow r = row("[1, 403, 407]");
  EXPECT_EQ(r.tokens.value(), (std::vector<int32_t>{1, 403, 407}));
  EXPECT_FALSE(r.text.has_value());
  EXPECT_EQ(row("[[403, 407]]").tokens.value(), (std::vector<int32_t>{403, 407}));
}

TEST(OpenAiCompletionPrompt, TokenIdsOutsideTheVocabularyAreAnErrorRow) {
  EXPECT_EQ(bad("[1, 512]"), "input line 7: token id 512 out of range [0, 512)");
  EXPECT_EQ(bad("[-1]"), "input line 7: token id -1 out of range [0, 512)");
}

TEST(OpenAiCompletionPrompt, SeveralPromptsInOneRequestAreRefused) {
  EXPECT_EQ(bad(R"(["a", "b"])"), "input line 7: 'body.prompt' holds 2 prompts; a request line is one prompt here "
                                  "(write one request line, with its own custom_id, per prompt)");
  EXPECT_EQ(bad("[[1, 2], [3], [4]]").rfind("input line 7: 'body.prompt' holds 3 prompts;", 0), 0u);
}

TEST(OpenAiCompletionPrompt, AnythingElseIsAnErrorRowSayingWhatAPromptIs) {
  const std::string what =
      "input line 7: 'body.prompt' must be a string or a non-empty list of token ids (or a list of one of these)";
  for (const char* p : {"[]", "[[]]", "5", "[1.5]", R"(["a", 1])", R"({"text": "a"})", "[true]"})
    EXPECT_EQ(bad(p), what) << p;
}
