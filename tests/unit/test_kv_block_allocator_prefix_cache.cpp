// Automatic prefix caching: the allocator's reference counts, LRU eviction and verified hits, and
// the scheduler driven by a fake model whose "KV" at each position folds in every cached position
// before it, so a step that read a wrong or unwritten block would produce different tokens than the
// direct computation over the sequence's own tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
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
using tpbatch::StepInputs;

std::vector<int32_t> seq_tokens(std::initializer_list<std::pair<int32_t, int>> runs) {
  std::vector<int32_t> t;  // runs of (first token, count), counting up
  for (auto [first, n] : runs)
    for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

uint64_t always_collides(uint64_t, std::span<const int32_t>) { return 42; }

TEST(PrefixCacheAllocator, SharesRegisteredBlocksWithReferenceCounts) {
  KvBlockAllocator a(8, 4, true);
  const std::vector<int32_t> toks = seq_tokens({{10, 10}});  // 2 full blocks + 2 tokens
  std::vector<int32_t> t1, t2;
  ASSERT_TRUE(a.grow(t1, 10));
  a.register_full_blocks(t1, toks, 10);
  EXPECT_EQ(a.cached_blocks(), 2);  // the partial third block is not published
  EXPECT_EQ(a.share_cached_prefix(t2, toks, 10), 8);
  ASSERT_EQ(t2.size(), 2u);
  EXPECT_EQ(t2[0], t1[0]);
  EXPECT_EQ(t2[1], t1[1]);
  EXPECT_EQ(a.ref_count(t1[0]), 2);
  EXPECT_EQ(a.ref_count(t1[2]), 1);
  EXPECT_EQ(a.free_blocks(), 5);
  const int32_t shared0 = t1[0];
  a.release(t1);
  EXPECT_EQ(a.ref_count(shared0), 1);
  EXPECT_EQ(a.free_blocks(), 6);  // the private third block is free again, the shared ones are held
  a.release(t2);
  EXPECT_EQ(a.ref_count(shared0), 0);
  EXPECT_EQ(a.free_blocks(), 8);
  EXPECT_EQ(a.cached_blocks(), 2);  // unreferenced but still cached
  std::vector<int32_t> t3;
  EXPECT_EQ(a.share_cached_prefix(t3, toks, 10), 8);
  EXPECT_EQ(t3[0], shared0);
  a.release(t3);
}

TEST(PrefixCacheAllocator, NeverSharesAPartialBlockAndHonoursTheLimit) {
  KvBlockAllocator a(8, 4, true);
  const std::vector<int32_t> toks = seq_tokens({{10, 12}});
  std::vector<int32_t> t1, t2, t3;
  ASSERT_TRUE(a.grow(t1, 12));
  a.register_full_blocks(t1, toks, 7);  // one block full of computed tokens, the second half done
  EXPECT_EQ(a.cached_blocks(), 1);
  EXPECT_EQ(a.share_cached_prefix(t2, toks, 12), 4);
  a.release(t2);
  a.register_full_blocks(t1, toks, 12);
  EXPECT_EQ(a.cached_blocks(), 3);
  EXPECT_EQ(a.share_cached_prefix(t3, toks, 11), 8);  // a limit of 11 tokens: 2 whole blocks
  a.release(t3);
  // A prompt that ends inside a cached block shares only the blocks it fills.
  const std::vector<int32_t> shorter(toks.begin(), toks.begin() + 6);
  EXPECT_EQ(a.share_cached_prefix(t3, shorter, 6), 4);
  a.release(t3);
  a.release(t1);
  EXPECT_EQ(a.free_blocks(), 8);
}

TEST(PrefixCacheAllocator, AHitNeedsTheWholePrefixNotJustTheBlock) {
  KvBlockAllocator a(8, 4, true);
  const auto xy = seq_tokens({{10, 4}, {50, 4}});
  const auto zy = seq_tokens({{20, 4}, {50, 4}});
  const auto xw = seq_tokens({{10, 4}, {60, 4}});
  std::vector<int32_t> t1, t2;
  ASSERT_TRUE(a.grow(t1, 8));
  a.register_full_blocks(t1, xy, 8);
  EXPECT_EQ(a.share_cached_prefix(t2, zy, 8), 0);  // same second block after another first one
  EXPECT_TRUE(t2.empty());
  EXPECT_EQ(a.share_cached_prefix(t2, xw, 8), 4);
  a.release(t2);
  a.release(t1);
}

TEST(PrefixCacheAllocator, CollidingHashesAreResolvedByTokensAndParents) {
  // Every block hashes to 42: only the token and parent checks tell blocks apart.
  KvBlockAllocator a(16, 4, true, &always_collides);
  const auto xy = seq_tokens({{10, 4}, {50, 4}});
  const auto zy = seq_tokens({{20, 4}, {50, 4}});
  const auto xw = seq_tokens({{10, 4}, {60, 4}});
  std::vector<int32_t> t1, t2, t3, q;
  ASSERT_TRUE(a.grow(t1, 8));
  a.register_full_blocks(t1, xy, 8);
  ASSERT_TRUE(a.grow(t2, 8));
  a.register_full_blocks(t2, zy, 8);
  EXPECT_EQ(a.cached_blocks(), 4);
  EXPECT_EQ(a.share_cached_prefix(q, zy, 8), 8);
  EXPECT_EQ(q, t2);
  a.release(q);
  EXPECT_EQ(a.share_cached_prefix(q, xy, 8), 8);
  EXPECT_EQ(q, t1);
  a.release(q);
  EXPECT_EQ(a.share_cached_prefix(q, xw, 8), 4);
  EXPECT_EQ(q[0], t1[0]);
  a.release(q);
  const auto other = seq_tokens({{30, 8}});
  EXPECT_EQ(a.share_cached_prefix(q, other, 8), 0);
  a.release(t1);
  a.release(t2);
  EXPECT_EQ(a.free_blocks(), 16);
}

TEST(PrefixCacheAllocator, EvictsTheLeastRecentlyReleasedBlocksTailFirst) {
  KvBlockAllocator a(4, 4, true);
  const auto pa = seq_tokens({{10, 8}});
  const auto pb = seq_tokens({{30, 8}});
  std::vector<int32_t> ta, tb, tc, q;
  ASSERT_TRUE(a.grow(ta, 8));
  a.register_full_blocks(ta, pa, 8);
  ASSERT_TRUE(a.grow(tb, 8));
  a.register_full_blocks(tb, pb, 8);
  a.release(ta);  // released first: evicted first
  a.release(tb);
  EXPECT_EQ(a.free_blocks(), 4);
  ASSERT_TRUE(a.grow(tc, 4));  // takes one block: A's last block goes, its first stays cached
  EXPECT_EQ(a.share_cached_prefix(q, pa, 8), 4);
  a.release(q);
  EXPECT_EQ(a.share_cached_prefix(q, pb, 8), 8);
  a.release(q);
  ASSERT_TRUE(a.grow(tc, 8));  // one more block
  EXPECT_EQ(a.share_cached_prefix(q, pa, 8), 0);
  a.release(q);
  EXPECT_EQ(a.share_cached_prefix(q, pb, 8), 8);  // B was used again since: more recent than A
  EXPECT_FALSE(a.grow(tc, 20)) << "referenced blocks are never evicted";
  a.release(q);
  a.release(tc);
  EXPECT_EQ(a.free_blocks(), 4);
}

TEST(PrefixCacheAllocator, ADuplicateStaysPrivateAndItsChildrenChainToTheCachedBlock) {
  KvBlockAllocator a(16, 4, true);
  const auto p = seq_tokens({{10, 8}});
  std::vector<int32_t> t1, t2, q;
  ASSERT_TRUE(a.grow(t1, 4));
  ASSERT_TRUE(a.grow(t2, 8));
  a.register_full_blocks(t1, p, 4);  // the first block only
  a.register_full_blocks(t2, p, 8);  // its first block duplicates t1's, its second is new
  EXPECT_EQ(a.cached_blocks(), 2);
  EXPECT_EQ(a.share_cached_prefix(q, p, 8), 8);
  EXPECT_EQ(q[0], t1[0]);
  EXPECT_EQ(q[1], t2[1]);
  a.release(q);
  a.release(t2);
  EXPECT_EQ(a.free_blocks(), 15);  // t2's duplicate went straight back to the free list
  a.release(t1);
  EXPECT_EQ(a.free_blocks(), 16);
}

TEST(PrefixCacheAllocator, OffSharesNothingAndCachesNothing) {
  KvBlockAllocator a(4, 4, false);
  const auto p = seq_tokens({{10, 8}});
  std::vector<int32_t> t1, q;
  ASSERT_TRUE(a.grow(t1, 8));
  a.register_full_blocks(t1, p, 8);
  EXPECT_EQ(a.cached_blocks(), 0);
  EXPECT_EQ(a.share_cached_prefix(q, p, 8), 0);
  a.release(t1);
  EXPECT_EQ(a.free_blocks(), 4);
}

// ---- The scheduler over a fake model. -----------------------------------------------------

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
// "Attention": position p's KV is a function of every earlier position's KV and its own token.
uint64_t kv_of(uint64_t context, int32_t token, int64_t pos) { return mix(context ^ mix(static_cast<uint64_t>(token) + 1000003ull * pos)); }
uint64_t fold(uint64_t context, uint64_t kv) { return mix(context * 31 + kv); }
int32_t token_of(uint64_t kv) { return 10 + static_cast<int32_t>(kv % 7); }  // few values: prompts and outputs repeat

// What a sequence must have produced: the same recurrence over its own tokens.
void expect_generated_directly(const Sequence& s) {
  uint64_t context = 0;
  for (int64_t p = 0; p + 1 < static_cast<int64_t>(s.tokens.size()); ++p) {
    const uint64_t kv = kv_of(context, s.tokens[p], p);
    context = fold(context, kv);
    if (p + 1 >= s.prompt_len) ASSERT_EQ(s.tokens[p + 1], token_of(kv)) << "row " << s.row << " position " << p + 1;
  }
}

class FakeModel {
 public:
  FakeModel(int64_t num_blocks, int64_t block_size)
      : bs_(block_size), kv_(static_cast<size_t>(num_blocks * block_size)), written_(kv_.size(), 0) {}

  // Reads every cached position from the cache as it was before the step (a block another
  // sequence writes in this same step must not be read), then writes the step's positions.
  std::vector<LogitResult> run(const StepInputs& in) {
    std::vector<uint64_t> row_kv(static_cast<size_t>(in.rows()));
    std::vector<std::pair<size_t, uint64_t>> writes;
    int64_t row = 0;
    for (const auto& sl : in.seqs) {
      const int32_t* ids = in.block_ids.data() + sl.blocks_begin;
      auto slot = [&](int64_t p) {
        EXPECT_LT(p / bs_, sl.num_blocks);
        return static_cast<size_t>(ids[p / bs_] * bs_ + p % bs_);
      };
      uint64_t context = 0;
      for (int64_t p = 0; p < sl.pos_begin; ++p) {
        EXPECT_TRUE(written_[slot(p)]) << "position " << p << " read before it was written";
        context = fold(context, kv_[slot(p)]);
      }
      for (int64_t i = 0; i < sl.num_rows; ++i, ++row) {
        const int64_t p = sl.pos_begin + i;
        EXPECT_EQ(in.positions[row], p);
        const uint64_t kv = kv_of(context, in.tokens[row], p);
        context = fold(context, kv);
        writes.emplace_back(slot(p), kv);
        row_kv[row] = kv;
      }
      rows_computed += sl.num_rows;
    }
    for (auto [s, kv] : writes) {
      kv_[s] = kv;
      written_[s] = 1;
    }
    std::vector<LogitResult> out;
    for (const auto& lr : in.logits) {
      const int32_t t = token_of(row_kv[lr.row]);
      out.push_back(LogitResult{t, 1.0f, 1.5f, lr.target == t ? 1.0f : 0.0f});
    }
    return out;
  }
  int64_t rows_computed = 0;

 private:
  int64_t bs_;
  std::vector<uint64_t> kv_;
  std::vector<uint8_t> written_;
};

std::unique_ptr<Sequence> row_with(int64_t row, std::vector<int32_t> prompt, int64_t new_tokens) {
  auto s = std::make_unique<Sequence>();
  s->row = row;
  s->prompt_len = static_cast<int64_t>(prompt.size());
  s->max_len = s->prompt_len + new_tokens;
  s->tokens = std::move(prompt);
  return s;
}

// Rows sharing a 23-token prefix (a few-shot prompt), each with its own question.
std::vector<int32_t> shared_prefix_prompt(int64_t row) {
  std::vector<int32_t> p = seq_tokens({{100, 23}});
  for (int64_t i = 0; i <= row % 5; ++i) p.push_back(static_cast<int32_t>(200 + row * 10 + i));
  return p;
}

struct RunOutcome {
  std::vector<std::unique_ptr<Sequence>> done;
  int64_t rows_computed = 0, hit_tokens = 0, preemptions = 0;
};

// Runs rows to completion; under pipeline_stages > 1 keeps that many steps in flight, each run by
// the model when it is scheduled (as the stages do, in order) and applied when it "comes back".
RunOutcome run_rows(KvBlockAllocator& alloc, SchedulerLimits lim, int64_t rows, int64_t new_tokens) {
  Scheduler sched(lim, alloc);
  FakeModel model(alloc.num_blocks(), alloc.block_size());
  for (int64_t r = 0; r < rows; ++r) sched.add(row_with(r, shared_prefix_prompt(r), new_tokens));
  RunOutcome run;
  std::deque<std::vector<LogitResult>> pending;
  for (int guard = 0; guard < 100000 && !(sched.idle() && pending.empty()); ++guard) {
    while (static_cast<int64_t>(pending.size()) < lim.pipeline_stages) {
      StepInputs in = sched.schedule();
      if (in.rows() == 0) break;
      pending.push_back(model.run(in));
    }
    if (pending.empty()) break;
    apply_step(sched, pending.front(), {}, 100);
    pending.pop_front();
    for (auto& s : sched.take_finished()) run.done.push_back(std::move(s));
  }
  EXPECT_TRUE(sched.idle());
  EXPECT_EQ(alloc.free_blocks(), alloc.num_blocks()) << "blocks leaked";
  run.rows_computed = model.rows_computed;
  run.hit_tokens = sched.prefix_cache_hit_tokens();
  run.preemptions = sched.preemptions();
  std::sort(run.done.begin(), run.done.end(), [](const auto& a, const auto& b) { return a->row < b->row; });
  return run;
}

void expect_same_outputs(const RunOutcome& on, const RunOutcome& off, int64_t rows) {
  ASSERT_EQ(on.done.size(), static_cast<size_t>(rows));
  ASSERT_EQ(off.done.size(), static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    EXPECT_EQ(on.done[r]->finish_reason, tpbatch::FinishReason::kLength);
    expect_generated_directly(*on.done[r]);
    expect_generated_directly(*off.done[r]);
    EXPECT_EQ(on.done[r]->tokens, off.done[r]->tokens);
  }
}

TEST(PrefixCacheScheduler, ASecondRowWithTheSamePrefixStartsAtTheCachedLength) {
  KvBlockAllocator alloc(64, 4, true);
  Scheduler sched(SchedulerLimits{8, 256}, alloc);
  FakeModel model(64, 4);
  const std::vector<int32_t> prompt = seq_tokens({{10, 10}});
  sched.add(row_with(0, prompt, 3));
  sched.add(row_with(1, prompt, 3));
  StepInputs s1 = sched.schedule();
  ASSERT_EQ(s1.seqs.size(), 1u) << "row 1 waits for row 0 to compute the blocks they share";
  EXPECT_EQ(s1.seqs[0].num_rows, 10);
  apply_step(sched, model.run(s1), {}, 100);
  StepInputs s2 = sched.schedule();
  ASSERT_EQ(s2.seqs.size(), 2u);
  EXPECT_EQ(s2.seqs[1].pos_begin, 8) << "(10 - 1) rounded down to the block size";
  EXPECT_EQ(s2.seqs[1].num_rows, 2);
  EXPECT_EQ(s2.block_ids[s2.seqs[1].blocks_begin], s2.block_ids[s2.seqs[0].blocks_begin]);
  EXPECT_EQ(sched.prefix_cache_hit_tokens(), 8);
  apply_step(sched, model.run(s2), {}, 100);
  std::vector<std::unique_ptr<Sequence>> done;
  while (!sched.idle()) {
    StepInputs in = sched.schedule();
    ASSERT_GT(in.rows(), 0);
    apply_step(sched, model.run(in), {}, 100);
    for (auto& s : sched.take_finished()) done.push_back(std::move(s));
  }
  ASSERT_EQ(done.size(), 2u);
  for (auto& s : done) expect_generated_directly(*s);
  EXPECT_EQ(done[0]->tokens, done[1]->tokens);
  EXPECT_EQ(done[0]->prompt_tokens_cached + done[1]->prompt_tokens_cached, 8);
  EXPECT_EQ(alloc.free_blocks(), alloc.num_blocks());
}

TEST(PrefixCacheScheduler, AnIdenticalPromptStillComputesItsLastToken) {
  KvBlockAllocator alloc(64, 4, true);
  Scheduler sched(SchedulerLimits{8, 256}, alloc);
  FakeModel model(64, 4);
  const std::vector<int32_t> prompt = seq_tokens({{10, 8}});  // exactly two blocks
  sched.add(row_with(0, prompt, 1));
  StepInputs s1 = sched.schedule();
  apply_step(sched, model.run(s1), {}, 100);
  sched.add(row_with(1, prompt, 1));
  StepInputs s2 = sched.schedule();
  ASSERT_EQ(s2.seqs.size(), 1u);
  EXPECT_EQ(s2.seqs[0].pos_begin, 4);  // the second block holds the last token: recomputed
  EXPECT_EQ(s2.seqs[0].num_rows, 4);
  apply_step(sched, model.run(s2), {}, 100);
  auto done = sched.take_finished();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0]->tokens, done[1]->tokens);
}

TEST(PrefixCacheScheduler, ScoringRowsComputeEveryPosition) {
  KvBlockAllocator alloc(64, 4, true);
  Scheduler sched(SchedulerLimits{8, 256}, alloc);
  FakeModel model(64, 4);
  const std::vector<int32_t> prompt = seq_tokens({{10, 12}});
  sched.add(row_with(0, prompt, 1));
  apply_step(sched, model.run(sched.schedule()), {}, 100);
  auto score = row_with(1, prompt, 0);
  score->scoring = true;
  score->prompt_len = 6;
  score->score_from = 6;
  sched.add(std::move(score));
  StepInputs in = sched.schedule();
  ASSERT_EQ(in.seqs.size(), 1u);
  EXPECT_EQ(in.seqs[0].pos_begin, 0);
  EXPECT_EQ(in.seqs[0].num_rows, 12);
  EXPECT_EQ(in.logits.size(), 6u);
  apply_step(sched, model.run(in), {}, 100);
  EXPECT_EQ(sched.prefix_cache_hit_tokens(), 0);
}

TEST(PrefixCacheScheduler, SharedPrefixesGiveTheSameTokensWithFarFewerRowsComputed) {
  const int64_t rows = 12;
  KvBlockAllocator on_alloc(256, 4, true), off_alloc(256, 4, false);
  const SchedulerLimits lim{16, 512};
  RunOutcome on = run_rows(on_alloc, lim, rows, 5);
  RunOutcome off = run_rows(off_alloc, lim, rows, 5);
  expect_same_outputs(on, off, rows);
  EXPECT_EQ(off.hit_tokens, 0);
  EXPECT_EQ(on.hit_tokens, (rows - 1) * 20);  // 23 shared tokens: 5 whole blocks
  EXPECT_EQ(on.rows_computed, off.rows_computed - on.hit_tokens);
  int64_t cached = 0;
  for (auto& s : on.done) cached += s->prompt_tokens_cached;
  EXPECT_EQ(cached, on.hit_tokens);
}

TEST(PrefixCacheScheduler, EvictionUnderPressureStillRecomputesCorrectly) {
  // 14 blocks of 4 tokens: three rows of 24..28 + 12 tokens at most fit, so rows preempt and
  // evict each other's cached blocks all the time.
  const int64_t rows = 10;
  KvBlockAllocator on_alloc(14, 4, true), off_alloc(14, 4, false);
  const SchedulerLimits lim{6, 64};
  RunOutcome on = run_rows(on_alloc, lim, rows, 12);
  RunOutcome off = run_rows(off_alloc, lim, rows, 12);
  expect_same_outputs(on, off, rows);
  EXPECT_GT(on.preemptions, 0);
  EXPECT_GT(on.hit_tokens, 0);
}

TEST(PrefixCacheScheduler, CollidingHashesUnderPressureStillGiveTheDirectTokens) {
  const int64_t rows = 10;
  KvBlockAllocator on_alloc(14, 4, true, &always_collides), off_alloc(14, 4, false);
  const SchedulerLimits lim{6, 64};
  RunOutcome on = run_rows(on_alloc, lim, rows, 12);
  RunOutcome off = run_rows(off_alloc, lim, rows, 12);
  expect_same_outputs(on, off, rows);
  EXPECT_GT(on.hit_tokens, 0);
}

TEST(PrefixCacheScheduler, PipelinedStepsNeverReadABlockBeforeItsStepRan) {
  const int64_t rows = 12;
  KvBlockAllocator on_alloc(256, 4, true), off_alloc(256, 4, false);
  SchedulerLimits lim{16, 40};  // chunked prefill too
  lim.pipeline_stages = 3;
  RunOutcome on = run_rows(on_alloc, lim, rows, 6);
  RunOutcome off = run_rows(off_alloc, lim, rows, 6);
  expect_same_outputs(on, off, rows);
  EXPECT_GT(on.hit_tokens, 0);
}

}  // namespace
