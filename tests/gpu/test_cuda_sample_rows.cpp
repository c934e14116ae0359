// Backend::sample_rows on the CUDA device against the definition of a sampled draw,
// sample_token_reference (engine/sampler_reference.h): for every row the same token, and its
// logit. Rows of many shapes (flat, peaked, ties, vocabulary sizes of no particular multiple) and
// parameters (top-k only, top-p only, min-p, all of them). A row the kernel cannot decide goes to
// the host's draw, which the test counts: NaN and infinite rows must, ordinary rows rarely do.
// The CPU backend, the host's sampler over the same rows, must agree too.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cuda_backend.h"
#include "engine/output_processor.h"
#include "engine/sampler_reference.h"

namespace tpbatch {
namespace {

struct Case {
  std::vector<float> logits;
  DrawParams params;
  bool must_go_to_host = false;
};

int32_t reference(const Case& c) {
  SamplingParams p;
  p.temperature = c.params.temperature;
  p.top_k = c.params.top_k;
  p.top_p = c.params.top_p;
  p.min_p = c.params.min_p;
  p.seed = c.params.seed;
  return sample_token_reference(c.logits.data(), static_cast<int64_t>(c.logits.size()), p, c.params.row,
                                c.params.step, c.params.sample);
}

// Draws every case of one vocabulary size on `be`; returns the tokens and counts the host's draws.
std::vector<DrawnToken> draw(Backend& be, const std::vector<Case>& cases, int64_t vocab, int* host_draws) {
  const size_t n = cases.size();
  std::vector<float> flat;
  std::vector<int64_t> rows;
  std::vector<DrawParams> params;
  for (size_t i = 0; i < n; ++i) {
    flat.insert(flat.end(), cases[i].logits.begin(), cases[i].logits.end());
    rows.push_back(static_cast<int64_t>(n - 1 - i));  // rows in any order
    params.push_back(cases[n - 1 - i].params);
  }
  std::vector<float> row_max(n, std::numeric_limits<float>::quiet_NaN());
  Buffer buf = be.alloc(flat.size(), DType::F32);
  be.upload(buf.view(), flat.data(), flat.size() * sizeof(float));
  std::vector<DrawnToken> out(n);
  std::atomic<int> calls{0};  // the CPU backend draws its rows on parallel threads
  HostDraw host = [&](const float* l, int64_t v, const DrawParams& p, float mx) {
    ++calls;
    return draw_on_host(l, v, p, mx);
  };
  be.sample_rows(buf.view(), vocab, rows, params, row_max, host, out);
  *host_draws = calls;
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<Case> cases_of(int64_t vocab, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<uint64_t> any;
  const double temperatures[] = {0.3, 0.8, 1.0, 2.5};
  const int64_t top_ks[] = {0, 1, 5, 50, vocab + 3};
  const double top_ps[] = {1.0, 0.9, 0.5, 0.999};
  const double min_ps[] = {0.0, 0.05, 0.3};
  std::vector<Case> cases;
  for (int shape = 0; shape < 8; ++shape) {
    Case c;
    c.logits.resize(static_cast<size_t>(vocab));
    for (auto& l : c.logits) {
      switch (shape) {
        case 0: l = normal(rng); break;                           // a language model's spread
        case 1: l = 4.0f * normal(rng); break;                    // wider
        case 2: l = std::round(2.0f * normal(rng)) / 2.0f; break;  // few values: many ties
        case 3: l = 1.5f; break;                                  // flat: every token tied
        case 4: l = 0.01f * normal(rng); break;                   // nearly flat
        default: l = normal(rng); break;
      }
    }
    if (shape == 5) c.logits[static_cast<size_t>(any(rng) % vocab)] = 60.0f;  // very peaked
    if (shape == 6 && vocab > 1) c.logits[static_cast<size_t>(any(rng) % vocab)] = -0.0f, c.logits[0] = 0.0f;
    DrawParams& p = c.params;
    p.temperature = temperatures[any(rng) % 4];
    switch (shape % 4) {  // top-k only, top-p only, min-p only, everything
      case 0: p.top_k = top_ks[any(rng) % 5]; break;
      case 1: p.top_p = top_ps[any(rng) % 4]; break;
      case 2: p.min_p = min_ps[any(rng) % 3]; break;
      default:
        p.top_k = top_ks[any(rng) % 5], p.top_p = top_ps[any(rng) % 4], p.min_p = min_ps[any(rng) % 3];
        break;
    }
    p.seed = any(rng);
    p.row = any(rng) % 1000, p.step = any(rng) % 100, p.sample = shape % 2 ? 0 : any(rng) % 4;
    cases.push_back(c);
  }
  Case nan_row = cases[0];  // the reference's arithmetic has NaNs: the host decides
  nan_row.logits[static_cast<size_t>(vocab / 2)] = std::numeric_limits<float>::quiet_NaN();
  nan_row.must_go_to_host = true;
  cases.push_back(nan_row);
  Case inf_row = cases[1];
  inf_row.logits[static_cast<size_t>(vocab - 1)] = std::numeric_limits<float>::infinity();
  inf_row.must_go_to_host = true;
  cases.push_back(inf_row);
  return cases;
}

TEST(CudaSampleRows, EveryRowDrawsTheReferencesToken) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto gpu = make_cuda_backend(0);
  auto cpu = make_cpu_backend();
  const unsigned seed = std::random_device{}();
  std::printf("seed %u\n", seed);
  std::mt19937_64 rng(seed);
  int ordinary_rows = 0, ordinary_host_draws = 0;
  for (int64_t vocab : {1, 2, 7, 1000, 4093, 4096}) {
    for (int round = 0; round < 6; ++round) {
      const std::vector<Case> cases = cases_of(vocab, rng);
      int host_draws = 0;
      const std::vector<DrawnToken> got = draw(*gpu, cases, vocab, &host_draws);
      int cpu_draws = 0;
      const std::vector<DrawnToken> on_cpu = draw(*cpu, cases, vocab, &cpu_draws);
      int must = 0;
      for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        if (c.must_go_to_host) ++must;
        if (std::isnan(c.logits[static_cast<size_t>(vocab / 2)])) continue;  // no order to agree on
        const int32_t want = reference(c);
        EXPECT_EQ(got[i].token, want) << "vocab " << vocab << " case " << i << " T " << c.params.temperature
                                      << " top_k " << c.params.top_k << " top_p " << c.params.top_p << " min_p "
                                      << c.params.min_p;
        EXPECT_EQ(on_cpu[i].token, want) << "CPU backend, vocab " << vocab << " case " << i;
        if (got[i].token == want) EXPECT_EQ(got[i].logit, c.logits[static_cast<size_t>(want)]);
      }
      EXPECT_GE(host_draws, must) << "NaN and infinite rows are the host's";
      EXPECT_EQ(cpu_draws, static_cast<int>(cases.size()));
      ordinary_rows += static_cast<int>(cases.size()) - must;
      ordinary_host_draws += host_draws - must;
    }
  }
  // Ordinary rows reach the host only on a near tie with a threshold (the flat rows' top-p cut).
  EXPECT_LE(ordinary_host_draws * 5, ordinary_rows);
}

}  // namespace
}  // namespace tpbatch
