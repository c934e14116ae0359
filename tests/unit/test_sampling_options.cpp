// The fuller sampling options: each penalty changes the logits exactly as its
// definition says and so the distribution; min_p cuts it; min_tokens holds EOS back; stop token
// ids stop; top_logprobs equal log_softmax of the logits; the keys are validated per job and per row.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "apply_step.h"
#include "engine/kv_block_allocator.h"
#include "engine/output_processor.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "common/error.h"
#include "io/input_row.h"
#include "io/row_result.h"
#include "job/job_spec.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace {

using namespace tpbatch;

// log_softmax in double, the direct computation the engine is checked against.
std::vector<double> log_softmax(const std::vector<float>& l) {
  double mx = -INFINITY;
  for (float v : l) mx = std::max(mx, static_cast<double>(v));
  double z = 0;
  for (float v : l) z += std::exp(v - mx);
  std::vector<double> out;
  for (float v : l) out.push_back(v - mx - std::log(z));
  return out;
}

float log_z(const std::vector<float>& l) {
  double mx = -INFINITY;
  for (float v : l) mx = std::max(mx, static_cast<double>(v));
  double z = 0;
  for (float v : l) z += std::exp(v - mx);
  return static_cast<float>(mx + std::log(z));
}

std::map<int, double> frequencies(const std::vector<float>& logits, const SamplingParams& p, int draws) {
  std::map<int, double> f;
  for (int i = 0; i < draws; ++i)
    f[sample_token(logits.data(), static_cast<int64_t>(logits.size()), p, static_cast<uint64_t>(i), 0)] += 1.0 / draws;
  return f;
}

TEST(SamplingOptions, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogitsOfSeenTokens) {
  const std::vector<float> raw = {2.0f, -1.0f, 0.5f, 3.0f, 1.0f};
  SamplingParams p;
  p.repetition_penalty = 2.0;
  const std::vector<int32_t> tokens = {0, 1, 1, 4};  // prompt {0, 1}, generated {1, 4}: both count
  std::vector<float> l = raw;
  apply_penalties(l.data(), 5, p, tokens, 2);
  EXPECT_EQ(l, (std::vector<float>{1.0f, -2.0f, 0.5f, 3.0f, 0.5f}));  // each seen token once, whatever its count
  // The distribution sampled from is the softmax of exactly those logits.
  p.temperature = 1.0;
  const auto f = frequencies(l, p, 40000);
  const auto want = log_softmax(l);
  for (int t = 0; t < 5; ++t) EXPECT_NEAR(f.count(t) ? f.at(t) : 0.0, std::exp(want[t]), 0.01) << t;
}

TEST(SamplingOptions, PresenceAndFrequencyPenaltiesCountOnlyGeneratedTokens) {
  SamplingParams p;
  p.presence_penalty = 0.5;
  p.frequency_penalty = 0.25;
  const std::vector<int32_t> tokens = {3, 3, 0, 0, 0, 2};  // prompt {3, 3}; generated 0 x3, 2 x1
  std::vector<float> l = {1.0f, 1.0f, 1.0f, 1.0f};
  apply_penalties(l.data(), 4, p, tokens, 2);
  EXPECT_FLOAT_EQ(l[0], 1.0f - (0.25f * 3 + 0.5f));
  EXPECT_FLOAT_EQ(l[1], 1.0f);
  EXPECT_FLOAT_EQ(l[2], 1.0f - (0.25f + 0.5f));
  EXPECT_FLOAT_EQ(l[3], 1.0f);  // in the prompt only: OpenAI's penalties do not see it
  // Negative penalties encourage repetition.
  SamplingParams q;
  q.presence_penalty = -1.0;
  std::vector<float> m = {0.0f, 0.0f};
  apply_penalties(m.data(), 2, q, std::vector<int32_t>{1}, 0);
  EXPECT_FLOAT_EQ(m[1], 1.0f);
}

TEST(SamplingOptions, MinPKeepsTokensAtLeastMinPTimesTheMostLikely) {
  // Probabilities 0.5, 0.3, 0.15, 0.05; min_p 0.25 keeps p >= 0.125: tokens 0, 1, 2.
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0;
  p.min_p = 0.25;
  const auto f = frequencies(l, p, 20000);
  EXPECT_EQ(f.count(3), 0u);
  EXPECT_NEAR(f.at(0), 0.5 / 0.95, 0.015);
  EXPECT_NEAR(f.at(2), 0.15 / 0.95, 0.015);
  p.min_p = 1.0;  // only the most likely token
  for (const auto& [t, _] : frequencies(l, p, 200)) EXPECT_EQ(t, 0);
}

// A generating sequence with prompt {1, 2}, driven through the output processor by hand.
std::unique_ptr<Sequence> generating(const SamplingParams& p, int64_t max_new = 10) {
  auto s = std::make_unique<Sequence>();
  s->tokens = {1, 2};
  s->prompt_len = 2;
  s->max_len = 2 + max_new;
  s->sampling = p;
  s->eos_ids = {5};
  return s;
}

LogitResult result_of(const std::vector<float>& l) {
  LogitResult r;
  r.argmax = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
  r.max_logit = l[r.argmax];
  r.log_z = log_z(l);
  return r;
}

TEST(SamplingOptions, GreedyWithAPenaltyPicksThePenalizedArgmaxButRecordsTheModelsLogprob) {
  SamplingParams p;
  p.repetition_penalty = 4.0;
  auto s = generating(p);
  ASSERT_TRUE(needs_full_logits(*s));  // greedy, yet the argmax alone is not enough
  const std::vector<float> l = {0.0f, 0.0f, 3.0f, 1.0f, 0.0f, 0.0f};  // token 2 is in the prompt: 3 / 4 < 1
  OutputProcessor out;
  out.generate(*s, result_of(l), l.data(), 6);
  ASSERT_EQ(s->num_generated(), 1);
  EXPECT_EQ(s->tokens.back(), 3);
  EXPECT_NEAR(s->logprobs.back(), log_softmax(l)[3], 1e-5);
}

TEST(SamplingOptions, MinTokensHoldsEosBackUntilReached) {
  SamplingParams p;
  p.min_tokens = 3;
  auto s = generating(p);
  const std::vector<float> l = {0.0f, 0.0f, 0.0f, 1.0f, 0.0f, 9.0f};  // EOS (5) is by far the most likely
  OutputProcessor out;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(needs_full_logits(*s));
    out.generate(*s, result_of(l), l.data(), 6);
    EXPECT_EQ(s->tokens.back(), 3) << i;
    EXPECT_EQ(s->finish_reason, std::nullopt);
  }
  EXPECT_FALSE(needs_full_logits(*s));  // greedy from here: the argmax is enough
  out.generate(*s, result_of(l), nullptr, 6);
  EXPECT_EQ(s->tokens.back(), 5);
  EXPECT_EQ(s->finish_reason, FinishReason::kEos);
  EXPECT_EQ(s->num_generated(), 4);
}

TEST(SamplingOptions, StopTokenIdsFinishTheRowAndAreHeldBackByMinTokens) {
  SamplingParams p;
  p.stop_token_ids = {4};
  auto s = generating(p);
  const std::vector<float> l = {0.0f, 0.0f, 0.0f, 1.0f, 2.0f, 0.0f};
  OutputProcessor out;
  out.generate(*s, result_of(l), nullptr, 6);
  EXPECT_EQ(s->finish_reason, FinishReason::kStop);
  EXPECT_EQ(s->tokens.back(), 4);  // kept in /output_tokens, as vLLM does
  p.min_tokens = 2;
  auto t = generating(p);
  out.generate(*t, result_of(l), l.data(), 6);
  EXPECT_EQ(t->tokens.back(), 3);
  out.generate(*t, result_of(l), l.data(), 6);
  EXPECT_EQ(t->tokens.back(), 3);
  EXPECT_EQ(t->finish_reason, std::nullopt);
  out.generate(*t, result_of(l), nullptr, 6);
  EXPECT_EQ(t->finish_reason, FinishReason::kStop);
}

TEST(SamplingOptions, TopLogprobsAreTheKBestOfTheLogSoftmax) {
  SamplingParams p;
  p.top_logprobs = 3;
  p.temperature = 0.8;
  p.repetition_penalty = 1.5;  // changes what is picked, not the recorded distribution
  auto s = generating(p);
  const std::vector<float> l = {0.3f, -1.0f, 2.5f, 2.5f, 1.75f, -3.0f};
  OutputProcessor out;
  out.generate(*s, result_of(l), l.data(), 6);
  out.generate(*s, result_of(l), l.data(), 6);
  const auto want = log_softmax(l);
  ASSERT_EQ(s->top_ids.size(), 6u);  // 2 positions x k
  ASSERT_EQ(s->top_logprobs.size(), 6u);
  for (int pos = 0; pos < 2; ++pos) {
    EXPECT_EQ(std::vector<int32_t>(s->top_ids.begin() + 3 * pos, s->top_ids.begin() + 3 * pos + 3),
              (std::vector<int32_t>{2, 3, 4}));  // ties by the lower id
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(s->top_logprobs[3 * pos + j], want[s->top_ids[3 * pos + j]], 1e-5);
  }
  for (int pos = 0; pos < 2; ++pos) EXPECT_NEAR(s->logprobs[pos], want[s->tokens[2 + pos]], 1e-5);
}

TEST(SamplingOptions, TopLogprobsAreThoseOfAFullSortOnLongRowsWithTies) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t vocab : {3, 300, 5000}) {
    std::vector<float> l(static_cast<size_t>(vocab));
    for (float& v : l) v = std::round(normal(rng) * 2.0f) / 2.0f;  // many equal logits
    for (int64_t k : {1, 3, 20}) {
      std::vector<int32_t> ids(static_cast<size_t>(vocab));
      std::iota(ids.begin(), ids.end(), 0);
      const int64_t kk = std::min(k, vocab);
      std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(),
                        [&](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); });
      const auto got = top_logprobs(l.data(), vocab, k, 1.5f);
      ASSERT_EQ(static_cast<int64_t>(got.size()), kk);
      for (int64_t i = 0; i < kk; ++i) {
        EXPECT_EQ(got[i].first, ids[i]) << "vocab " << vocab << " k " << k << " rank " << i;
        EXPECT_EQ(got[i].second, l[ids[i]] - 1.5f);
      }
    }
  }
}

TEST(SamplingOptions, SchedulerAsksForFullLogitsOfGreedyRowsThatNeedThem) {
  KvBlockAllocator alloc(16, 4);
  Scheduler sched(SchedulerLimits{4, 64}, alloc);
  SamplingParams plain, top;
  top.top_logprobs = 2;
  sched.add(generating(plain));
  auto second = generating(top);
  second->row = 1;
  sched.add(std::move(second));
  StepInputs in = sched.schedule();
  ASSERT_EQ(in.logits.size(), 2u);
  EXPECT_FALSE(in.logits[0].full);
  EXPECT_TRUE(in.logits[1].full);
  const std::vector<float> l = {0.0f, 1.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  apply_step(sched, {result_of(l), result_of(l)}, l, 6);
  EXPECT_EQ(sched.num_running(), 2u);
}

JobSpec generate_job() {
  JobSpec j;
  j.task = Task::kGenerate;
  return j;
}

std::string bad_row(std::string_view line) {
  try {
    parse_input_row(line, 0, generate_job(), 512);
  } catch (const BadLine& b) {
    return b.reason;
  }
  return "accepted";
}

TEST(SamplingOptions, RowKeysParseAndBadValuesNameTheKey) {
  InputRow r = parse_input_row(
      R"({"prompt": "x", "min_p": 0.1, "repetition_penalty": 1.3, "presence_penalty": -0.5, "frequency_penalty": 0.7,
          "stop_token_ids": [7, 9], "min_tokens": 4, "top_logprobs": 5})",
      0, generate_job(), 512);
  EXPECT_EQ(r.sampling.min_p, 0.1);
  EXPECT_EQ(r.sampling.repetition_penalty, 1.3);
  EXPECT_EQ(r.sampling.presence_penalty, -0.5);
  EXPECT_EQ(r.sampling.frequency_penalty, 0.7);
  EXPECT_EQ(r.sampling.stop_token_ids, (std::vector<int32_t>{7, 9}));
  EXPECT_EQ(r.sampling.min_tokens, 4);
  EXPECT_EQ(r.sampling.top_logprobs, 5);
  EXPECT_EQ(bad_row(R"({"prompt": "x", "min_p": 1.5})"), "input line 1: 'min_p' must be a number in [0, 1]");
  EXPECT_EQ(bad_row(R"({"prompt": "x", "repetition_penalty": 0})"),
            "input line 1: 'repetition_penalty' must be a number > 0");
  EXPECT_EQ(bad_row(R"({"prompt": "x", "presence_penalty": "a"})"),
            "input line 1: 'presence_penalty' must be a finite number");
  EXPECT_EQ(bad_row(R"({"prompt": "x", "frequency_penalty": null, "stop_token_ids": [-1]})"),
            "input line 1: 'stop_token_ids' must be a list of token ids (integers >= 0)");
  EXPECT_EQ(bad_row(R"({"prompt": "x", "min_tokens": -1})"), "input line 1: 'min_tokens' must be an integer >= 0");
  EXPECT_EQ(bad_row(R"({"prompt": "x", "top_logprobs": 21})"), "input line 1: 'top_logprobs' must be an integer in [0, 20]");
}

TEST(SamplingOptions, OpenAiBodyKeysMapToTheSameOverrides) {
  InputRow c = parse_input_row(
      R"({"custom_id": "a", "url": "/v1/completions", "body": {"prompt": "x", "logprobs": 3, "presence_penalty": 0.5,
          "frequency_penalty": 0.25, "min_p": 0.05, "top_k": 4, "repetition_penalty": 1.1, "min_tokens": 2,
          "stop_token_ids": [3]}})",
      0, generate_job(), 512);
  EXPECT_EQ(c.sampling.top_logprobs, 3);
  EXPECT_EQ(c.sampling.presence_penalty, 0.5);
  EXPECT_EQ(c.sampling.frequency_penalty, 0.25);
  EXPECT_EQ(c.sampling.min_p, 0.05);
  EXPECT_EQ(c.sampling.top_k, 4);
  EXPECT_EQ(c.sampling.repetition_penalty, 1.1);
  EXPECT_EQ(c.sampling.min_tokens, 2);
  EXPECT_EQ(c.sampling.stop_token_ids, std::vector<int32_t>{3});
  InputRow m = parse_input_row(
      R"({"custom_id": "b", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": "x"}],
          "logprobs": true, "top_logprobs": 2}})",
      0, generate_job(), 512);
  EXPECT_EQ(m.sampling.top_logprobs, 2);
  EXPECT_EQ(bad_row(R"({"custom_id": "c", "url": "/v1/completions", "body": {"prompt": "x", "logprobs": 30}})"),
            "input line 1: 'top_logprobs' must be an integer in [0, 20]");
}

// The same keys under `sampling:` in the job file: parsed, kept in the effective job, validated.
TEST(SamplingOptions, JobKeysParseRoundTripAndNameBadValues) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tpbatch_sampling_options_" + std::to_string(::getpid()));
  fs::create_directories(dir / "model");
  std::ofstream(dir / "prompts.jsonl") << "{\"prompt\": \"hi\"}\n";
  const std::string base = "model: " + (dir / "model").string() + "\ninput:\n  path: " + (dir / "prompts.jsonl").string() +
                           "\nsampling:\n";
  const JobSpec j = parse_job(base + "  min_p: 0.2\n  repetition_penalty: 1.2\n  presence_penalty: -0.5\n"
                                     "  frequency_penalty: 0.3\n  stop_token_ids: [2, 9]\n  min_tokens: 3\n  top_logprobs: 4\n",
                              {}, dir);
  EXPECT_EQ(j.sampling.min_p, 0.2);
  EXPECT_EQ(j.sampling.repetition_penalty, 1.2);
  EXPECT_EQ(j.sampling.presence_penalty, -0.5);
  EXPECT_EQ(j.sampling.frequency_penalty, 0.3);
  EXPECT_EQ(j.sampling.stop_token_ids, (std::vector<int32_t>{2, 9}));
  EXPECT_EQ(j.sampling.min_tokens, 3);
  EXPECT_EQ(j.sampling.top_logprobs, 4);
  const JobSpec back = parse_job(j.effective_yaml, {}, dir);
  EXPECT_EQ(back.effective_yaml, j.effective_yaml);
  EXPECT_EQ(back.sampling.stop_token_ids, j.sampling.stop_token_ids);
  auto error_of = [&](const std::string& extra) -> std::string {
    try {
      parse_job(base + extra, {}, dir);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_EQ(error_of("  min_p: 2\n"), "job.yaml: 'sampling.min_p' must be a number in [0, 1], got 2");
  EXPECT_EQ(error_of("  repetition_penalty: 0\n"), "job.yaml: 'sampling.repetition_penalty' must be a number > 0, got 0");
  EXPECT_EQ(error_of("  presence_penalty: nan\n"), "job.yaml: 'sampling.presence_penalty' must be a finite number, got \"nan\"");
  EXPECT_EQ(error_of("  stop_token_ids: [1, x]\n"),
            "job.yaml: 'sampling.stop_token_ids' must be a list of token ids (integers >= 0), got \"x\"");
  EXPECT_EQ(error_of("  min_tokens: -2\n"), "job.yaml: 'sampling.min_tokens' must be a non-negative integer, got -2");
  EXPECT_EQ(error_of("  top_logprobs: 21\n"), "job.yaml: 'sampling.top_logprobs' must be an integer in [0, 20], got 21");
  fs::remove_all(dir);
}

TEST(SamplingOptions, TopLogprobsTravelWithTheRowResult) {
  RowResult r;
  r.index = 3;
  r.output_tokens = {4, 5};
  r.top_logprob_tokens = {4, 1, 5, 2};
  r.top_logprobs = {-0.1f, -2.5f, -0.3f, -1.75f};
  const RowResult back = deserialize_row_result(serialize(r));
  EXPECT_EQ(back.top_logprob_tokens, r.top_logprob_tokens);
  EXPECT_EQ(back.top_logprobs, r.top_logprobs);
}

}  // namespace
