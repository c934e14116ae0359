// The reasoning split (job key reasoning) against vLLM's reasoning parsers' rules, written out case
// by case; `auto` on the real chat templates of tests/data/chat_templates; the thinking budget
// (sampling.max_reasoning_tokens): </think> forced after exactly N tokens of an open block, its
// logprob the model's, rows without a block untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "engine/constrained_choice.h"
#include "engine/output_processor.h"
#include "engine/reasoning_budget.h"
#include "engine/reasoning_parser.h"
#include "test_assets.h"

namespace {

using namespace tpbatch;

void expect_split(Reasoning parser, const std::string& text, const std::string& reasoning, const std::string& content) {
  const ReasoningSplit s = split_reasoning(parser, text);
  EXPECT_EQ(s.reasoning, reasoning) << reasoning_name(parser) << ": " << text;
  EXPECT_EQ(s.content, content) << reasoning_name(parser) << ": " << text;
}

TEST(ReasoningSplit, DeepSeekR1) {
  // The template opened <think>: the text starts inside the block.
  expect_split(Reasoning::kDeepSeekR1, "Let me see.\n</think>\n\nFour.", "Let me see.\n", "\n\nFour.");
  // A generated <think> and what precedes it are dropped.
  expect_split(Reasoning::kDeepSeekR1, "<think>\nHmm</think>Four.", "\nHmm", "Four.");
  expect_split(Reasoning::kDeepSeekR1, " <think>a</think>b</think>c", "a", "b</think>c");
  // No end: all reasoning (the row ran out of tokens while thinking).
  expect_split(Reasoning::kDeepSeekR1, "Still thinking", "Still thinking", "");
  expect_split(Reasoning::kDeepSeekR1, "</think>", "", "");
  expect_split(Reasoning::kDeepSeekR1, "", "", "");
}

TEST(ReasoningSplit, Qwen3) {
  expect_split(Reasoning::kQwen3, "<think>\nTwo and two.\n</think>\n\nFour.", "\nTwo and two.\n", "\n\nFour.");
  expect_split(Reasoning::kQwen3, "Two and two.</think>Four.", "Two and two.", "Four.");
  // No end: thinking was off (enable_thinking: false), all answer.
  expect_split(Reasoning::kQwen3, "Four.", "", "Four.");
  expect_split(Reasoning::kQwen3, "<think>unfinished", "", "unfinished");
}

TEST(ReasoningSplit, NoneKeepsTheWholeText) {
  expect_split(Reasoning::kNone, "<think>a</think>b", "", "<think>a</think>b");
}

std::string template_source(const std::string& name) {
  std::ifstream in(test::test_data_dir() / "chat_templates" / (name + ".jinja"));
  EXPECT_TRUE(in) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(ReasoningAuto, PicksTheParserFromTheRealTemplates) {
  EXPECT_EQ(resolve_reasoning(Reasoning::kAuto, template_source("qwen3")), Reasoning::kQwen3);
  EXPECT_EQ(resolve_reasoning(Reasoning::kAuto, template_source("qwen3-4b-thinking-2507")), Reasoning::kDeepSeekR1);
  EXPECT_EQ(resolve_reasoning(Reasoning::kAuto, template_source("deepseek-r1-distill-qwen-7b")), Reasoning::kDeepSeekR1);
  EXPECT_EQ(resolve_reasoning(Reasoning::kAuto, template_source("qwq-32b")), Reasoning::kDeepSeekR1);
  EXPECT_EQ(resolve_reasoning(Reasoning::kAuto, template_source("llama-3.1-instruct")), Reasoning::kNone);
  EXPECT_EQ(resolve_reasoning(Reasoning::kAuto, ""), Reasoning::kNone);  // no template
  EXPECT_EQ(resolve_reasoning(Reasoning::kQwen3, template_source("llama-3.1-instruct")), Reasoning::kQwen3);
}

// A greedy row over a vocabulary of 8: <think> = 6, </think> = 7, EOS = 5; the prompt is
// {1, prompt_tail...}.
constexpr int32_t kOpen = 6, kClose = 7;
std::unique_ptr<Sequence> row(std::vector<int32_t> prompt, int64_t budget) {
  auto s = std::make_unique<Sequence>();
  s->tokens = std::move(prompt);
  s->prompt_len = static_cast<int64_t>(s->tokens.size());
  s->max_len = s->prompt_len + 20;
  s->sampling.max_reasoning_tokens = budget;
  s->eos_ids = {5};
  start_think_block(*s, ThinkTokens{kOpen, kClose});
  return s;
}

double log_softmax_at(const std::vector<float>& l, int t) {
  double mx = -INFINITY, z = 0;
  for (float v : l) mx = std::max(mx, static_cast<double>(v));
  for (float v : l) z += std::exp(v - mx);
  return l[t] - mx - std::log(z);
}

LogitResult result_of(const std::vector<float>& l) {
  LogitResult r;
  r.argmax = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  r.max_logit = l[r.argmax];
  r.log_z = static_cast<float>(l[r.argmax] - log_softmax_at(l, r.argmax));  // log-sum-exp
  return r;
}

// One greedy step, the logits brought to the host only when the row asks for them; a constrained
// row that does not gets its masked maximum instead, as the LM head gives it.
void step(OutputProcessor& out, Sequence& s, const std::vector<float>& l) {
  LogitResult res = result_of(l);
  if (!needs_full_logits(s) && constraint_applies(s)) {
    StepInputs in;
    add_constraint_mask(s, 0, in);
    res.allowed_max_logit = -INFINITY;
    for (size_t i = 0; i < l.size(); ++i)
      if (in.mask_bits(in.masks.at(0)).allows(static_cast<int64_t>(i)) && l[i] > res.allowed_max_logit)
        res.allowed_max_logit = l[i], res.allowed_argmax = static_cast<int32_t>(i);
  }
  out.generate(s, res, needs_full_logits(s) ? l.data() : nullptr, static_cast<int64_t>(l.size()));
}

const std::vector<float> kLogits = {0.0f, 0.5f, 0.0f, 3.0f, 0.0f, -1.0f, -2.0f, -4.0f};  // argmax 3, never </think>

TEST(ReasoningBudget, ForcesTheEndAfterExactlyNTokensOfABlockThePromptOpened) {
  auto s = row({1, 2, kOpen, 2}, 3);
  EXPECT_TRUE(s->think.open);
  OutputProcessor out;
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(forces_end_of_reasoning(*s)) << i;
    step(out, *s, kLogits);
    EXPECT_EQ(s->tokens.back(), 3);
  }
  ASSERT_TRUE(forces_end_of_reasoning(*s));
  EXPECT_TRUE(needs_full_logits(*s));
  EXPECT_FALSE(draws_on_backend(*s));
  step(out, *s, kLogits);
  EXPECT_EQ(s->tokens.back(), kClose);
  EXPECT_NEAR(s->logprobs.back(), log_softmax_at(kLogits, kClose), 1e-5);  // the model's own logprob of it
  EXPECT_FALSE(s->all_greedy);  // </think> was not the argmax
  EXPECT_FALSE(s->think.open);
  for (int i = 0; i < 4; ++i) step(out, *s, kLogits);  // the answer: free again
  EXPECT_EQ(std::vector<int32_t>(s->tokens.begin() + 4, s->tokens.end()),
            (std::vector<int32_t>{3, 3, 3, kClose, 3, 3, 3, 3}));
}

TEST(ReasoningBudget, ABudgetOf0ClosesTheBlockAtOnce) {
  auto s = row({1, kOpen}, 0);
  OutputProcessor out;
  step(out, *s, kLogits);
  EXPECT_EQ(s->tokens.back(), kClose);
}

TEST(ReasoningBudget, ABlockTheRowOpensCountsFromItsOwnThink) {
  auto s = row({1, 2}, 2);
  EXPECT_FALSE(s->think.open);
  OutputProcessor out;
  std::vector<float> opens = kLogits;
  opens[kOpen] = 9.0f;  // the row's first token is <think>
  step(out, *s, opens);
  EXPECT_TRUE(s->think.open);
  step(out, *s, kLogits);
  step(out, *s, kLogits);
  step(out, *s, kLogits);
  EXPECT_EQ(std::vector<int32_t>(s->tokens.begin() + 2, s->tokens.end()), (std::vector<int32_t>{kOpen, 3, 3, kClose}));
}

TEST(ReasoningBudget, ABlockClosedInThePromptOrNeverOpenedIsNotTouched) {
  for (const std::vector<int32_t>& prompt : {std::vector<int32_t>{1, kOpen, 2, kClose, 2}, std::vector<int32_t>{1, 2}}) {
    auto s = row(prompt, 0);
    EXPECT_FALSE(s->think.open);
    OutputProcessor out;
    for (int i = 0; i < 5; ++i) {
      EXPECT_FALSE(needs_full_logits(*s));
      step(out, *s, kLogits);
    }
    EXPECT_EQ(std::vector<int32_t>(s->tokens.end() - 5, s->tokens.end()), (std::vector<int32_t>(5, 3)));
    EXPECT_TRUE(s->all_greedy);
  }
}

TEST(ReasoningBudget, AModelThatEndsItsThinkingItselfIsNotForced) {
  auto s = row({1, kOpen}, 5);
  OutputProcessor out;
  std::vector<float> closes = kLogits;
  closes[kClose] = 9.0f;
  step(out, *s, kLogits);
  step(out, *s, closes);
  EXPECT_FALSE(s->think.open);
  for (int i = 0; i < 6; ++i) step(out, *s, kLogits);
  EXPECT_TRUE(s->all_greedy);
  EXPECT_EQ(std::count(s->tokens.begin() + 2, s->tokens.end(), kClose), 1);
}

TEST(ReasoningBudget, NoBudgetNoForcing) {
  auto s = row({1, kOpen}, kNoReasoningBudget);
  OutputProcessor out;
  for (int i = 0; i < 10; ++i) {
    EXPECT_FALSE(forces_end_of_reasoning(*s));
    step(out, *s, kLogits);
  }
  EXPECT_TRUE(s->all_greedy);
}

TEST(ReasoningBudget, InsideReasoningFollowsTheBlock) {
  auto s = row({1, kOpen}, 2);
  OutputProcessor out;
  EXPECT_TRUE(inside_reasoning(*s));
  step(out, *s, kLogits);
  step(out, *s, kLogits);
  EXPECT_TRUE(inside_reasoning(*s));
  step(out, *s, kLogits);  // the forced </think>
  EXPECT_EQ(s->tokens.back(), kClose);
  EXPECT_FALSE(inside_reasoning(*s));
  Sequence untracked;  // no think tokens known: never inside
  untracked.tokens = {1, kOpen};
  EXPECT_FALSE(inside_reasoning(untracked));
}

}  // namespace

// A constraint shapes the answer, not the reasoning: with a reasoning parser on it starts after
// the </think> (here the forced one), and the matcher sees none of the reasoning tokens.
TEST(ReasoningBudget, AConstraintStartsAfterTheReasoningEnds) {
  auto vocab = std::make_shared<guided::TokenBytes>();
  vocab->bytes = {"a", "b", "c", "x", "y", "", "<think>", "</think>"};
  vocab->usable = {true, true, true, true, true, false, false, false};
  auto s = row({1, kOpen}, 2);
  s->reasoning = Reasoning::kQwen3;
  s->constraint = std::make_shared<guided::Constraint>("ab", vocab);
  s->constraint_state = s->constraint->start();
  OutputProcessor out;
  for (int i = 0; i < 2; ++i) {
    EXPECT_FALSE(constraint_applies(*s)) << i;
    step(out, *s, kLogits);  // free: the argmax 'x', which "ab" would not allow
  }
  step(out, *s, kLogits);  // the forced </think>
  EXPECT_TRUE(constraint_applies(*s));
  for (int i = 0; i < 3; ++i) step(out, *s, kLogits);
  EXPECT_EQ(std::vector<int32_t>(s->tokens.begin() + 2, s->tokens.end()), (std::vector<int32_t>{3, 3, kClose, 0, 1, 5}));
  EXPECT_EQ(s->finish_reason, FinishReason::kEos);  // the whole match, then EOS
}

TEST(ReasoningBudget, WithAReasoningParserAConstraintWaitsForAThinkBlockTheModelOpens) {
  auto vocab = std::make_shared<guided::TokenBytes>();
  vocab->bytes = {"a", "b", "c", "x", "y", "", "<think>", "</think>"};
  vocab->usable = {true, true, true, true, true, false, false, false};
  auto s = row({1, 2}, kNoReasoningBudget);  // nothing opened or closed in the prompt
  s->reasoning = Reasoning::kQwen3;
  s->constraint = std::make_shared<guided::Constraint>("ab", vocab);
  EXPECT_FALSE(constraint_applies(*s));
  auto closed = row({1, kOpen, kClose}, kNoReasoningBudget);  // Qwen3 with enable_thinking: false
  closed->reasoning = Reasoning::kQwen3;
  closed->constraint = s->constraint;
  EXPECT_TRUE(constraint_applies(*closed));
  auto no_parser = row({1, 2}, kNoReasoningBudget);
  no_parser->constraint = s->constraint;
  EXPECT_TRUE(constraint_applies(*no_parser));
}
