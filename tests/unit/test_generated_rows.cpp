// A generating row's tokens: /is_greedy says whether every one was the model's argmax, and the
// scheduler chooses a step's rows on parallel threads exactly as on one.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "apply_step.h"
#include "engine/kv_block_allocator.h"
#include "engine/output_processor.h"
#include "engine/row_admitter.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace {

using namespace tpbatch;

std::unique_ptr<Sequence> generating(const SamplingParams& p, int64_t line = 0) {
  auto s = std::make_unique<Sequence>();
  s->row = line;
  s->line = line;
  s->tokens = {1, 2};
  s->prompt_len = 2;
  s->max_len = 2 + 16;
  s->sampling = p;
  return s;
}

LogitResult result_of(const std::vector<float>& l) {
  LogitResult r;
  r.argmax = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  r.max_logit = l[r.argmax];
  double z = 0;
  for (float v : l) z += std::exp(static_cast<double>(v) - r.max_logit);
  r.log_z = static_cast<float>(r.max_logit + std::log(z));
  return r;
}

TEST(GeneratedRows, IsGreedyWhileEveryTokenIsTheArgmax) {
  const std::vector<float> l = {0.0f, 0.5f, 3.0f, 1.0f};
  auto s = generating(SamplingParams{});
  OutputProcessor out;
  for (int i = 0; i < 3; ++i) out.generate(*s, result_of(l), nullptr, 4);
  EXPECT_EQ(to_result(*s, false).is_greedy, 1);
}

TEST(GeneratedRows, IsNotGreedyOnceASampledTokenIsNotTheArgmax) {
  std::vector<float> l(50, 0.0f);  // nearly flat: 49 draws in 50 miss the argmax, token 7
  l[7] = 0.01f;
  SamplingParams p;
  p.temperature = 1.0;
  auto s = generating(p);
  OutputProcessor out;
  out.generate(*s, result_of(l), l.data(), 50);
  ASSERT_NE(s->tokens.back(), 7) << "the draw hit the argmax: pick another line";
  EXPECT_EQ(to_result(*s, false).is_greedy, 0);
}

TEST(GeneratedRows, IsNotGreedyWhenAPenaltyMovesThePickOffTheModelsArgmax) {
  SamplingParams p;  // temperature 0
  p.repetition_penalty = 4.0;
  auto s = generating(p);
  const std::vector<float> l = {0.0f, 0.0f, 3.0f, 1.0f};  // token 2 is in the prompt: 3 / 4 < 1
  OutputProcessor out;
  out.generate(*s, result_of(l), l.data(), 4);
  ASSERT_EQ(s->tokens.back(), 3);
  EXPECT_EQ(to_result(*s, false).is_greedy, 0);
}

// Every row of one step sampled with `threads` OpenMP threads: the tokens, in row order.
std::vector<int32_t> sample_step(int threads) {
  constexpr int64_t kRows = 24, kVocab = 3000;
  KvBlockAllocator alloc(256, 4);
  Scheduler sched(SchedulerLimits{kRows, 1024}, alloc);
  std::vector<const Sequence*> rows;  // the scheduler owns them; they stay where they are
  for (int64_t line = 0; line < kRows; ++line) {
    SamplingParams p;
    p.temperature = 0.5 + 0.1 * static_cast<double>(line % 5);
    p.top_p = line % 3 == 0 ? 0.9 : 1.0;
    p.top_k = line % 4 == 0 ? 40 : 0;
    p.repetition_penalty = line % 2 ? 1.2 : 1.0;
    p.top_logprobs = line % 5 == 0 ? 3 : 0;
    auto s = generating(p, line);
    rows.push_back(s.get());
    sched.add(std::move(s));
  }
  const StepInputs in = sched.schedule();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> full(in.logits.size() * kVocab);
  for (float& v : full) v = normal(rng);
  std::vector<LogitResult> results;
  for (size_t i = 0; i < in.logits.size(); ++i)
    results.push_back(result_of(std::vector<float>(full.begin() + i * kVocab, full.begin() + (i + 1) * kVocab)));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  apply_step(sched, results, full, kVocab);
  omp_set_num_threads(saved);
  std::vector<int32_t> tokens;
  for (const Sequence* s : rows) tokens.push_back(s->num_generated() == 1 ? s->tokens.back() : -1);
  return tokens;
}

TEST(GeneratedRows, AStepsRowsSampleTheSameTokensOnAnyNumberOfThreads) {
  const std::vector<int32_t> one = sample_step(1);
  ASSERT_EQ(std::count(one.begin(), one.end(), -1), 0) << "a row did not sample in the step";
  EXPECT_EQ(sample_step(3), one);
  EXPECT_EQ(sample_step(8), one);
}

}  // namespace
