// Constrained rows masked on the vocabulary shards: the leader ships each constrained row's
// allowed tokens with the step (StepInputs::masks) instead of asking for its full logits; the
// shards' masked maxima combine like the unmasked ones; and the token picked from the masked
// statistics is the one the host-masked path picks from the full logits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

#include "common/error.h"
#include "engine/constrained_choice.h"
#include "engine/kv_block_allocator.h"
#include "engine/output_processor.h"
#include "engine/scheduler.h"
#include "model/logit_combine.h"
#include "model/step_inputs.h"

namespace tpbatch {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int32_t kEos = 2;

// Token i writes "a", "b", "c", ... ; token kEos is special (the constraint never allows it).
std::shared_ptr<guided::TokenBytes> letters(int n) {
  auto v = std::make_shared<guided::TokenBytes>();
  for (int i = 0; i < n; ++i) {
    v->bytes.push_back(std::string(1, static_cast<char>('a' + i % 26)));
    v->usable.push_back(i != kEos);
  }
  return v;
}

std::unique_ptr<Sequence> constrained_row(const std::string& regex, int vocab) {
  auto s = std::make_unique<Sequence>();
  s->tokens = {0, 1, 3};
  s->prompt_len = 3;
  s->max_len = 10;
  s->eos_ids = {kEos};
  s->constraint = std::make_shared<guided::Constraint>(regex, letters(vocab));
  s->constraint_state = s->constraint->start();
  return s;
}

// The step the scheduler builds for one row's first decode (after its prefill step).
StepInputs decode_step(std::unique_ptr<Sequence> s, bool backend_draws) {
  KvBlockAllocator alloc(16, 4);
  SchedulerLimits lim{4, 64};
  lim.backend_draws = backend_draws;
  Scheduler sched(lim, alloc);
  sched.add(std::move(s));
  return sched.schedule();  // the prefill's last row picks the first token
}

TEST(VocabMasks, AConstrainedGreedyRowShipsItsMaskNotItsFullLogits) {
  const StepInputs in = decode_step(constrained_row("(b|d)+", 30), true);
  ASSERT_EQ(in.logits.size(), 1u);
  EXPECT_FALSE(in.logits[0].full);
  EXPECT_TRUE(in.draws.empty());
  ASSERT_EQ(in.masks.size(), 1u);
  EXPECT_EQ(in.masks[0].request, 0);
  const TokenMaskBits bits = in.mask_bits(in.masks[0]);
  for (int id = 0; id < 64; ++id) {
    const bool want = id < 30 && id != kEos && (id % 26 == 1 || id % 26 == 3);  // "b" or "d"; EOS only at a whole match
    EXPECT_EQ(bits.allows(id), want) << id;
  }
}

TEST(VocabMasks, ASampledConstrainedRowIsDrawnFromItsMaskedLogits) {
  auto s = constrained_row("b*", 30);
  s->sampling.temperature = 0.8;
  const StepInputs in = decode_step(std::move(s), true);
  ASSERT_EQ(in.logits.size(), 1u);
  EXPECT_FALSE(in.logits[0].full);
  ASSERT_EQ(in.draws.size(), 1u);
  ASSERT_EQ(in.masks.size(), 1u);
  EXPECT_TRUE(in.mask_bits(in.masks[0]).allows(kEos));  // "" is a whole match of b*: EOS may end it
  EXPECT_TRUE(in.mask_bits(in.masks[0]).allows(1));
  EXPECT_FALSE(in.mask_bits(in.masks[0]).allows(0));
}

TEST(VocabMasks, RowsThatNeedTheirFullLogitsKeepTheHostPath) {
  auto penalized = constrained_row("b*", 30);
  penalized->sampling.repetition_penalty = 1.3;
  StepInputs in = decode_step(std::move(penalized), true);
  EXPECT_TRUE(in.logits.at(0).full);
  EXPECT_TRUE(in.masks.empty());
  auto sampled = constrained_row("b*", 30);  // no backend draws: the host draws from the full logits
  sampled->sampling.temperature = 0.8;
  in = decode_step(std::move(sampled), false);
  EXPECT_TRUE(in.logits.at(0).full);
  EXPECT_TRUE(in.masks.empty());
}

TEST(VocabMasks, MasksTravelWithTheStepMessage) {
  StepInputs in;
  in.logits = {LogitRequest{0, -1, false}, LogitRequest{1, -1, false}};
  TokenMaskWriter w = in.mask_writer();
  w.begin(0);
  w.allow(3);
  w.allow(200);
  w.begin(1);  // nothing allowed
  w.allow(-1);
  const StepInputs back = StepInputs::deserialize(in.serialize());
  ASSERT_EQ(back.masks.size(), 2u);
  EXPECT_EQ(back.masks[0].request, 0);
  EXPECT_EQ(back.masks[1].request, 1);
  for (int id = 0; id < 300; ++id) {
    EXPECT_EQ(back.mask_bits(back.masks[0]).allows(id), id == 3 || id == 200) << id;
    EXPECT_FALSE(back.mask_bits(back.masks[1]).allows(id)) << id;
  }
  StepInputs bad = in;
  bad.masks[1].num_words = 99;  // past the message's words
  EXPECT_THROW(StepInputs::deserialize(bad.serialize()), Error);
}

TEST(VocabMasks, AllowAllAddsEveryIdOfTheWordsToTheLastMask) {
  StepInputs in;
  in.logits = {LogitRequest{0, -1, false}, LogitRequest{1, -1, false}};
  TokenMaskWriter w = in.mask_writer();
  w.begin(0);
  w.allow(5);
  w.begin(1);
  w.allow(7);
  w.allow_all({uint64_t{1} << 3, 0, (uint64_t{1} << 63) | 1u});  // ids 3, 128 and 191: the mask grows
  w.allow_all({});
  for (int id = 0; id < 256; ++id) {
    EXPECT_EQ(in.mask_bits(in.masks[0]).allows(id), id == 5) << id;
    EXPECT_EQ(in.mask_bits(in.masks[1]).allows(id), id == 3 || id == 7 || id == 128 || id == 191) << id;
  }
}

// The words of a shard that starts mid-word, ends mid-word and runs past the mask's words.
TEST(VocabMasks, AShardsWordsHoldExactlyTheIdsTheMaskAllowsFromBitZero) {
  StepInputs in;
  TokenMaskWriter w = in.mask_writer();
  w.begin(0);
  for (int32_t id = 64; id < 128; ++id) w.allow(id);  // a whole word
  for (int32_t id : {5, 130, 191, 250}) w.allow(id);
  const TokenMaskBits bits = in.mask_bits(in.masks[0]);
  for (const auto& [v0, count] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 400}, {3, 300}, {100, 29}, {64, 64}, {63, 130}, {129, 64}}) {
    const int64_t words = (count + 63) / 64;
    std::vector<uint64_t> out(static_cast<size_t>(words) + 1, 0x5555);  // one word past: left alone
    bits.write_shard_words(v0, count, out.data());
    for (int64_t j = 0; j < 64 * words; ++j) {
      const int64_t id = v0 + j;
      const bool want = j < count && ((id >= 64 && id < 128) || id == 5 || id == 130 || id == 191 || id == 250);
      EXPECT_EQ(((out[j / 64] >> (j % 64)) & 1u) != 0, want) << "v0 " << v0 << " id " << id;
    }
    EXPECT_EQ(out.back(), 0x5555u);
  }
}

LogitStats shard(float max_logit, int32_t argmax) { return LogitStats{max_logit, argmax, 1.0f, std::nanf("")}; }

TEST(VocabMasks, AShardWithNoAllowedTokenContributesMinusInfinity) {
  // Two ranks, stride 3: per rank one unmasked row, then two masked ones.
  const LogitStats nothing{-kInf, 0, std::nanf(""), std::nanf("")};  // an all -inf shard: Σexp undefined
  const std::vector<LogitStats> all = {shard(5.0f, 7), nothing, shard(1.0f, 3),     // rank 0: ids [0, 100)
                                       shard(4.0f, 150), shard(2.5f, 120), shard(1.0f, 130)};  // rank 1
  std::vector<LogitResult> results(3);
  combine_logit_stats(all, 3, 1, 2, results.data());
  LogitResult* masked[2] = {&results[1], &results[2]};
  combine_allowed_maxima(all, 3, 1, 2, 2, masked);
  EXPECT_EQ(results[1].allowed_argmax, 120);  // rank 0 allows nothing
  EXPECT_EQ(results[1].allowed_max_logit, 2.5f);
  EXPECT_EQ(results[2].allowed_argmax, 3);    // a tie: the lower id
  const std::vector<LogitStats> none = {nothing, nothing};
  LogitResult r;
  LogitResult* one[1] = {&r};
  combine_allowed_maxima(none, 1, 0, 1, 2, one);
  EXPECT_EQ(r.allowed_argmax, -1);
  EXPECT_EQ(r.allowed_max_logit, -kInf);
}

// What the LM head gives a masked row (an independent, plain reading of the mask over whole rows).
LogitResult masked_result(const std::vector<float>& logits, const StepInputs& in) {
  LogitResult r;
  double mx = -kInf, z = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    if (logits[i] > mx) mx = logits[i], r.argmax = static_cast<int32_t>(i);
  for (float v : logits) z += std::exp(v - mx);
  r.max_logit = static_cast<float>(mx);
  r.log_z = static_cast<float>(mx + std::log(z));
  r.allowed_max_logit = -kInf;
  for (size_t i = 0; i < logits.size(); ++i)
    if (in.mask_bits(in.masks.at(0)).allows(static_cast<int64_t>(i)) && logits[i] > r.allowed_max_logit)
      r.allowed_max_logit = logits[i], r.allowed_argmax = static_cast<int32_t>(i);
  return r;
}

TEST(VocabMasks, TheMaskedArgmaxIsTheTokenTheHostMaskedPathPicks) {
  const int V = 60;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const char* regex : {"(b|d)+", "b*", "ab", "(ac|bd)e*"}) {
    for (int trial = 0; trial < 20; ++trial) {
      auto s = constrained_row(regex, V);
      s->constraint_state = s->constraint->advance(s->constraint_state, trial % 2 ? 1 : 0);  // "a" or "b" first
      if (s->constraint_state == guided::ByteDfa::kDead) s->constraint_state = s->constraint->start();
      std::vector<float> logits(V);
      for (float& v : logits) v = normal(rng);
      if (trial % 5 == 0) logits[3] = logits[1];  // ties go to the lower id either way
      StepInputs in;
      in.logits.push_back(LogitRequest{0, -1, false});
      add_constraint_mask(*s, 0, in);
      const LogitResult res = masked_result(logits, in);
      const TokenChoice shard_path = OutputProcessor::choose(*s, res, nullptr, V);
      const TokenChoice host_path = choose_constrained(*s, res, logits.data(), V);
      EXPECT_EQ(shard_path.token, host_path.token) << regex << " trial " << trial;
      EXPECT_EQ(shard_path.logit, host_path.logit) << regex << " trial " << trial;
    }
  }
}

// A sampled row: the backend's draw (the host draw on the masked row, as the CPU backend runs it)
// picks what the host-masked path draws from the full logits.
TEST(VocabMasks, TheDrawFromTheMaskedRowIsTheHostMaskedPathsDraw) {
  const int V = 60;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const char* regex : {"(b|d)+", "b*", "(ac|bd|c)e*"}) {
    for (int trial = 0; trial < 30; ++trial) {
      auto s = constrained_row(regex, V);
      s->sampling.temperature = 0.5 + 0.1 * (trial % 10);
      s->sampling.top_p = trial % 3 == 0 ? 0.8 : 1.0;
      s->sampling.seed = 5;
      s->line = trial;
      std::vector<float> logits(V);
      for (float& v : logits) v = normal(rng);
      StepInputs in;
      in.logits.push_back(LogitRequest{0, -1, false});
      add_constraint_mask(*s, 0, in);
      const LogitResult res = masked_result(logits, in);
      std::vector<float> masked(logits);
      for (int id = 0; id < V; ++id)
        if (!in.mask_bits(in.masks[0]).allows(id)) masked[id] = -kInf;
      const int32_t drawn = draw_on_host(masked.data(), V, draw_params(*s), res.allowed_max_logit);
      EXPECT_EQ(drawn, choose_constrained(*s, res, logits.data(), V).token) << regex << " trial " << trial;
      EXPECT_TRUE(in.mask_bits(in.masks[0]).allows(drawn)) << regex << " trial " << trial;
    }
  }
}

TEST(VocabMasks, ADeadEndStillEndsTheRowNamingThePosition) {
  auto s = constrained_row("ab", 30);
  s->constraint_state = s->constraint->advance(s->constraint->advance(s->constraint_state, 0), 1);  // "ab": whole
  s->sampling.min_tokens = 5;  // EOS held back: nothing can continue
  EXPECT_EQ(constraint_end(*s), kConstraintDeadEnd);
  LogitResult res;
  res.allowed_argmax = -1;
  OutputProcessor out;
  out.generate(*s, res, nullptr, 30);
  EXPECT_EQ(s->finish_reason, FinishReason::kError);
  EXPECT_NE(s->error.find("generated position 0"), std::string::npos) << s->error;
  auto complete = constrained_row("ab", 30);
  complete->eos_ids.clear();  // a whole match and no EOS id: "stop"
  complete->constraint_state = complete->constraint->advance(complete->constraint->advance(0, 0), 1);
  out.generate(*complete, res, nullptr, 30);
  EXPECT_EQ(complete->finish_reason, FinishReason::kStop);
}

}  // namespace
}  // namespace tpbatch
