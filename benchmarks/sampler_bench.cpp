// The host's token choice for one decode step: 64 rows of a 128,256-token vocabulary, sampled
// (temperature 0.8, and top_p 0.9 / top_k 50) against greedy, on one thread and with the rows on
// OpenMP's threads (as OutputProcessor::process runs them). Greedy is timed two ways: sample_token at
// temperature 0 (std::max_element, the host's greedy pick) and one vectorized pass (max_logit, the
// least any look at every logit costs). Repeats interleave greedy and sampled and report the median
// of the paired ratios, so a busy machine slows both alike. Also: which level decided the draws,
// the scan alone at each vector width this CPU has, and the old full-sort sampler once, for scale.
// Logits: normal with standard deviation 4 (what a generated 128k-vocabulary model gives: std 4.0,
// maximum 16-19), or rows read from a raw float32 file.
// Usage: tpbatch_sampler_bench [REPEATS=7] [LOGITS.f32]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/gemm/blas_core.h"
#include "engine/logit_scan.h"
#include "engine/sampler.h"
#include "engine/sampler_fast.h"
#include "engine/sampler_reference.h"

using namespace tpbatch;

namespace {

constexpr int64_t kVocab = 128256;
constexpr int64_t kRows = 64;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// fn(row) for every row of a step, on `threads` threads; ms.
double step_ms(int threads, const std::function<void(int64_t)>& fn) {
  const double t0 = now_ms();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t r = 0; r < kRows; ++r) fn(r);
  return now_ms() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  ensure_fast_blas_core(argv);  // the OpenMP wait policy tpbatch runs with (re-exec)
  const int repeats = argc > 1 ? std::stoi(argv[1]) : 7;
  std::vector<float> logits(static_cast<size_t>(kRows * kVocab));
  if (argc > 2) {
    std::ifstream in(argv[2], std::ios::binary);
    in.read(reinterpret_cast<char*>(logits.data()), static_cast<std::streamsize>(logits.size() * sizeof(float)));
    if (in.gcount() != static_cast<std::streamsize>(logits.size() * sizeof(float))) {
      std::fprintf(stderr, "%s: fewer than %lld rows of %lld floats\n", argv[2], (long long)kRows, (long long)kVocab);
      return 2;
    }
  } else {
    std::mt19937_64 rng(5);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    for (float& v : logits) v = normal(rng);
  }
  auto row = [&](int64_t r) { return logits.data() + r * kVocab; };
  const int threads = omp_get_max_threads();
  std::vector<int32_t> out(kRows);
  std::vector<float> maxima(kRows);
  uint64_t step = 0;

  SamplingParams greedy, temp, nucleus;
  temp.temperature = 0.8;
  nucleus.temperature = 0.8;
  nucleus.top_p = 0.9;
  nucleus.top_k = 50;
  auto pick = [&](const SamplingParams& p) {
    return [&](int64_t r) { out[r] = sample_token(row(r), kVocab, p, static_cast<uint64_t>(r), step); };
  };
  auto vector_pass = [&](int64_t r) { maxima[r] = max_logit(row(r), kVocab); };
  struct Case {
    const char* name;
    const SamplingParams* params;
    int threads;
  };
  const std::vector<Case> cases = {{"temperature 0.8, 1 thread", &temp, 1},
                                   {"temperature 0.8, rows in parallel", &temp, threads},
                                   {"top_p 0.9 top_k 50, 1 thread", &nucleus, 1},
                                   {"top_p 0.9 top_k 50, rows in parallel", &nucleus, threads}};
  std::printf("%lld rows x %lld vocabulary, %d OpenMP threads, median of %d paired repeats; greedy on the\n"
              "same threads as the case: argmax = std::max_element, pass = one vectorized max_logit pass\n",
              (long long)kRows, (long long)kVocab, threads, repeats);
  std::printf("%-38s | %9s | %10s | %8s | %10s | %8s\n", "sampled step", "ms", "argmax ms", "ratio", "pass ms",
              "ratio");
  for (const Case& c : cases) {
    std::vector<double> ms, argmax_ms, pass_ms, r_argmax, r_pass;
    for (int rep = 0; rep < repeats; ++rep, ++step) {
      const double a = step_ms(c.threads, pick(greedy));
      const double v = step_ms(c.threads, vector_pass);
      const double s = step_ms(c.threads, pick(*c.params));
      ms.push_back(s), argmax_ms.push_back(a), pass_ms.push_back(v);
      r_argmax.push_back(s / a), r_pass.push_back(s / v);
    }
    std::printf("%-38s | %9.3f | %10.3f | %7.2fx | %10.3f | %7.2fx\n", c.name, median(ms), median(argmax_ms),
                median(r_argmax), median(pass_ms), median(r_pass));
  }
  fast_sampler_counts() = {};
  for (int rep = 0; rep < repeats; ++rep, ++step) step_ms(1, pick(temp));
  const FastSamplerCounts& n = fast_sampler_counts();
  std::printf("temperature 0.8 draws decided at 8 / 12 / 16 nats / exact: %lld / %lld / %lld / %lld\n",
              (long long)n.level[0], (long long)n.level[1], (long long)n.level[2], (long long)n.level[3]);

  // The scan that dominates a draw, at each width (1 thread).
  std::vector<int32_t> ids(kVocab);
  const char* names[] = {"baseline (4 lanes)", "AVX2 (8 lanes)", "AVX-512 (16 lanes)"};
  for (ScanIsa isa : {ScanIsa::kBaseline, ScanIsa::kAvx2, ScanIsa::kAvx512}) {
    if (static_cast<int>(isa) > static_cast<int>(best_scan_isa())) break;
    std::vector<double> ms;
    for (int rep = 0; rep < repeats; ++rep)
      ms.push_back(step_ms(1, [&](int64_t r) {
        const float mx = max_logit(row(r), kVocab, isa);
        scan_tail(row(r), kVocab, mx, static_cast<float>(std::numbers::log2e / 0.8), mx - 6.4f,
                  std::numeric_limits<float>::infinity(), true, ids.data(), isa);
      }));
    std::printf("max + scan, %-26s | %9.3f ms a step\n", names[static_cast<int>(isa)], median(ms));
  }
  const double g = step_ms(1, pick(greedy));
  const double t0 = now_ms();
  for (int64_t r = 0; r < kRows; ++r)
    out[r] = sample_token_reference(row(r), kVocab, temp, static_cast<uint64_t>(r), 0, 0);
  const double full = now_ms() - t0;
  std::printf("%-38s | %9.3f | %10.3f | %7.2fx\n", "full sort (the old sampler), 1 thread", full, g, full / g);
  return 0;
}
