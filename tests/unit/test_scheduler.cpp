// The KV block allocator and the continuous-batching scheduler, driven with synthetic logits.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "apply_step.h"
#include "engine/kv_block_allocator.h"
#include "engine/scheduler.h"

namespace {

using tpbatch::KvBlockAllocator;
using tpbatch::LogitResult;
using tpbatch::Scheduler;
using tpbatch::SchedulerLimits;
using tpbatch::Sequence;

TEST(KvBlockAllocator, GrowsTablesAndReleasesEveryBlock) {
  KvBlockAllocator a(4, 16);
  std::vector<int32_t> t1, t2;
  EXPECT_TRUE(a.grow(t1, 17));  // 2 blocks
  EXPECT_EQ(t1.size(), 2u);
  EXPECT_TRUE(a.grow(t1, 32));  // still 2
  EXPECT_EQ(a.free_blocks(), 2);
  EXPECT_FALSE(a.grow(t2, 48));  // needs 3: nothing taken
  EXPECT_TRUE(t2.empty());
  EXPECT_EQ(a.free_blocks(), 2);
  a.release(t1);
  EXPECT_EQ(a.free_blocks(), 4);
  EXPECT_TRUE(t1.empty());
}

std::unique_ptr<Sequence> generating(int64_t row, int64_t prompt, int64_t new_tokens) {
  auto s = std::make_unique<Sequence>();
  s->row = row;
  s->tokens.resize(prompt);
  std::iota(s->tokens.begin(), s->tokens.end(), 10);
  s->prompt_len = prompt;
  s->max_len = prompt + new_tokens;
  return s;
}

// Runs the scheduler to completion with fake logits whose argmax is 7; returns steps taken.
int drain(Scheduler& sched, KvBlockAllocator& alloc, const SchedulerLimits& lim, std::vector<std::unique_ptr<Sequence>>& done) {
  int steps = 0;
  while (!sched.idle()) {
    auto in = sched.schedule();
    EXPECT_GT(in.rows(), 0);
    EXPECT_LE(in.rows(), lim.max_batch_tokens);
    EXPECT_LE(static_cast<int64_t>(in.seqs.size()), lim.max_seqs);
    std::vector<LogitResult> res(in.logits.size(), LogitResult{7, 1.0f, 1.5f, 0.0f});
    apply_step(sched, res, {}, 100);
    for (auto& s : sched.take_finished()) done.push_back(std::move(s));
    ++steps;
    EXPECT_LT(steps, 10000);
    if (steps >= 10000) break;
  }
  EXPECT_EQ(alloc.free_blocks(), alloc.num_blocks()) << "blocks leaked";
  return steps;
}

TEST(Scheduler, RunsEverySequenceToItsLengthWithinLimits) {
  KvBlockAllocator alloc(64, 4);
  SchedulerLimits lim{3, 10};
  Scheduler sched(lim, alloc);
  for (int i = 0; i < 7; ++i) sched.add(generating(i, 5 + i, 4));
  std::vector<std::unique_ptr<Sequence>> done;
  drain(sched, alloc, lim, done);
  ASSERT_EQ(done.size(), 7u);
  for (auto& s : done) {
    EXPECT_EQ(s->finish_reason, tpbatch::FinishReason::kLength);
    EXPECT_EQ(s->num_generated(), 4);
    EXPECT_EQ(s->tokens.back(), 7);
    EXPECT_NEAR(s->logprobs[0], -0.5f, 1e-6);  // max_logit - log_z
  }
}

TEST(Scheduler, ChunksLongPromptsUnderTheTokenBudget) {
  KvBlockAllocator alloc(64, 4);
  SchedulerLimits lim{4, 8};
  Scheduler sched(lim, alloc);
  sched.add(generating(0, 30, 1));
  auto first = sched.schedule();
  EXPECT_EQ(first.rows(), 8);
  EXPECT_TRUE(first.logits.empty());  // no token is sampled before the prompt is done
}

TEST(Scheduler, PreemptsWhenBlocksRunOutAndStillFinishesEverything) {
  KvBlockAllocator alloc(6, 4);  // 24 tokens for sequences of 16
  SchedulerLimits lim{4, 64};
  Scheduler sched(lim, alloc);
  for (int i = 0; i < 4; ++i) sched.add(generating(i, 6, 10));
  std::vector<std::unique_ptr<Sequence>> done;
  drain(sched, alloc, lim, done);
  EXPECT_EQ(done.size(), 4u);
  EXPECT_GT(sched.preemptions(), 0);
  for (auto& s : done) EXPECT_EQ(s->num_generated(), 10) << s->row;
}

TEST(Scheduler, RejectsAPromptLargerThanTheWholeCache) {
  KvBlockAllocator alloc(2, 4);
  Scheduler sched(SchedulerLimits{4, 64}, alloc);
  sched.add(generating(0, 20, 1));
  auto done = sched.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->finish_reason, tpbatch::FinishReason::kError);
  EXPECT_NE(done[0]->error.find("KV cache"), std::string::npos);
}

TEST(Scheduler, ScoresEveryTargetExactlyOnce) {
  KvBlockAllocator alloc(64, 4);
  SchedulerLimits lim{2, 3};
  Scheduler sched(lim, alloc);
  auto s = generating(0, 10, 0);
  s->scoring = true;
  s->score_from = 4;
  sched.add(std::move(s));
  std::vector<std::unique_ptr<Sequence>> done;
  drain(sched, alloc, lim, done);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->finish_reason, tpbatch::FinishReason::kScored);
  EXPECT_EQ(done[0]->logprobs.size(), 6u);  // positions 4..9
  EXPECT_FALSE(done[0]->all_greedy);        // argmax 7 never equals the targets 14..19
}

TEST(Scheduler, UnderPipeliningASequenceIsNeverInTwoStepsAtOnce) {
  KvBlockAllocator alloc(64, 4);
  SchedulerLimits lim{8, 64, 2};
  Scheduler sched(lim, alloc);
  for (int i = 0; i < 6; ++i) sched.add(generating(i, 3, 5));
  auto a = sched.schedule();
  auto b = sched.schedule();
  EXPECT_EQ(a.seqs.size(), 3u);  // the active sequences split into one micro-batch per stage
  EXPECT_EQ(b.seqs.size(), 3u);
  EXPECT_EQ(sched.schedule().rows(), 0);  // everything is in flight
  EXPECT_EQ(sched.steps_in_flight(), 2u);
}

// Longrope with an original context of 8 tokens: rope_tables of a step, per row.
SchedulerLimits longrope_limits(int64_t max_batch_tokens = 64) {
  SchedulerLimits lim{4, max_batch_tokens};
  lim.long_rope_after = 8;
  return lim;
}

void apply_argmax_7(Scheduler& sched, const tpbatch::StepInputs& in) {
  apply_step(sched, std::vector<LogitResult>(in.logits.size(), LogitResult{7, 1.0f, 1.5f, 0.0f}), {}, 100);
}

TEST(Scheduler, APromptWithinTheOriginalContextTurnsByTheShortRopeFactors) {
  KvBlockAllocator alloc(64, 4);
  Scheduler sched(longrope_limits(), alloc);
  sched.add(generating(0, 8, 1));
  const auto in = sched.schedule();
  EXPECT_EQ(in.rope_tables, std::vector<int32_t>(8, 0));
}

TEST(Scheduler, APromptLongerThanTheOriginalContextTurnsByTheLongRopeFactorsFromItsFirstToken) {
  KvBlockAllocator alloc(64, 4);
  Scheduler sched(longrope_limits(4), alloc);
  sched.add(generating(0, 9, 1));
  const auto first = sched.schedule();  // a chunk of 4: the sequence's length decides, not the chunk's
  EXPECT_EQ(first.rope_tables, std::vector<int32_t>(4, 1));
  apply_argmax_7(sched, first);
  EXPECT_EQ(sched.long_rope_recomputed_tokens(), 0);
}

TEST(Scheduler, GenerationCrossingTheOriginalContextIsComputedAgainWithTheLongRopeFactors) {
  KvBlockAllocator alloc(64, 4);
  Scheduler sched(longrope_limits(), alloc);
  sched.add(generating(0, 7, 4));
  auto in = sched.schedule();  // the prompt: 7 tokens, short factors
  EXPECT_EQ(in.rope_tables, std::vector<int32_t>(7, 0));
  apply_argmax_7(sched, in);
  in = sched.schedule();  // token 8 of 8: still within the original context
  EXPECT_EQ(in.positions, std::vector<int32_t>{7});
  EXPECT_EQ(in.rope_tables, std::vector<int32_t>{0});
  apply_argmax_7(sched, in);
  in = sched.schedule();  // 9 tokens: all of them again, from position 0, with the long factors
  EXPECT_EQ(in.rows(), 9);
  EXPECT_EQ(in.positions.front(), 0);
  EXPECT_EQ(in.rope_tables, std::vector<int32_t>(9, 1));
  ASSERT_EQ(in.logits.size(), 1u);  // and only the last row samples
  EXPECT_EQ(in.logits[0].row, 8);
  EXPECT_EQ(sched.long_rope_recomputed_tokens(), 8);
  apply_argmax_7(sched, in);
  in = sched.schedule();  // then one token a step again, still long
  EXPECT_EQ(in.rope_tables, std::vector<int32_t>{1});
  apply_argmax_7(sched, in);
  auto done = sched.take_finished();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0]->num_generated(), 4);
  EXPECT_EQ(done[0]->logprobs.size(), 4u);  // one per generated token: the recomputation adds none
  EXPECT_EQ(sched.long_rope_recomputed_tokens(), 8);
  EXPECT_EQ(alloc.free_blocks(), alloc.num_blocks());
}

TEST(Scheduler, WithoutLongropeStepsCarryNoRopeTables) {
  KvBlockAllocator alloc(64, 4);
  Scheduler sched(SchedulerLimits{4, 64}, alloc);
  sched.add(generating(0, 20, 1));
  EXPECT_TRUE(sched.schedule().rope_tables.empty());
}

TEST(Scheduler, LongRopeSequencesNeitherShareNorPublishPrefixCacheBlocks) {
  KvBlockAllocator alloc(64, 4, /*prefix_caching=*/true);
  Scheduler sched(longrope_limits(), alloc);
  sched.add(generating(0, 13, 1));  // long from the start
  auto in = sched.schedule();
  apply_argmax_7(sched, in);
  EXPECT_EQ(alloc.cached_blocks(), 0);
  sched.add(generating(1, 13, 1));  // the same tokens: computed, not shared
  in = sched.schedule();
  EXPECT_EQ(in.rows(), 13);
  EXPECT_EQ(sched.prefix_cache_hit_tokens(), 0);
  apply_argmax_7(sched, in);
  sched.add(generating(2, 8, 1));  // short: publishes its blocks
  apply_argmax_7(sched, sched.schedule());
  EXPECT_EQ(alloc.cached_blocks(), 2);
}

TEST(Scheduler, LongestFirstAdmitsTheLongestWaitingPrompt) {
  KvBlockAllocator alloc(64, 4);
  SchedulerLimits lim{1, 64, 1, true};
  Scheduler sched(lim, alloc);
  sched.add(generating(0, 3, 1));
  sched.add(generating(1, 9, 1));
  sched.add(generating(2, 5, 1));
  EXPECT_EQ(sched.schedule().rows(), 9);
}

}  // namespace
