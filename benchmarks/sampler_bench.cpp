// The host's share of a decode step's token choice: 64 rows of a 128,256-token vocabulary, sampled
// (temperature 0.8, and with top_p 0.9 / top_k 50) against the greedy argmax of the same rows, on
// one thread and with the rows on OpenMP's threads (as Scheduler::apply runs them). Also the old
// full-sort sampler (sample_token_reference) once, for scale. Repeats interleave greedy and sampled
// and report the median of the paired ratios, so a busy machine slows both alike.
// Logits: normal with standard deviation 4 (what a generated 128k-vocabulary model gives: std 4.0,
// maximum 16-19), or rows read from a raw float32 file.
// Usage: tpbatch_sampler_bench [REPEATS=7] [LOGITS.f32]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

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

// One step: every row's token, rows on `threads` threads; returns ms.
double step_ms(const std::vector<float>& logits, const SamplingParams& p, int threads, uint64_t step,
               std::vector<int32_t>& out) {
  const double t0 = now_ms();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int64_t r = 0; r < kRows; ++r)
    out[r] = sample_token(logits.data() + r * kVocab, kVocab, p, static_cast<uint64_t>(r), step);
  return now_ms() - t0;
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::stoi(argv[1]) : 7;
  std::vector<float> logits(static_cast<size_t>(kRows * kVocab));
  if (argc > 2) {
    std::ifstream in(argv[2], std::ios::binary);
    std::vector<float> file((std::istreambuf_iterator<char>(in)), {});
    in.close();
    in.open(argv[2], std::ios::binary);
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
  const int threads = omp_get_max_threads();
  std::vector<int32_t> out(kRows);

  SamplingParams greedy, temp, nucleus;
  temp.temperature = 0.8;
  nucleus.temperature = 0.8;
  nucleus.top_p = 0.9;
  nucleus.top_k = 50;
  struct Case {
    const char* name;
    const SamplingParams* params;
    int threads;
  };
  const std::vector<Case> cases = {{"temperature 0.8, 1 thread", &temp, 1},
                                   {"temperature 0.8, rows in parallel", &temp, threads},
                                   {"top_p 0.9 top_k 50, 1 thread", &nucleus, 1},
                                   {"top_p 0.9 top_k 50, rows in parallel", &nucleus, threads}};
  std::printf("%lld rows x %lld vocabulary, %d OpenMP threads, median of %d paired repeats\n", (long long)kRows,
              (long long)kVocab, threads, repeats);
  std::printf("greedy = the argmax of each row on 1 thread (what a greedy row costs the host at most)\n");
  std::printf("%-38s | %10s | %10s | %8s\n", "sampled step", "ms", "greedy ms", "ratio");
  for (const Case& c : cases) {
    std::vector<double> ms, greedy_ms, ratio;
    fast_sampler_counts() = {};
    for (int rep = 0; rep < repeats; ++rep) {
      const double g = step_ms(logits, greedy, 1, static_cast<uint64_t>(rep), out);
      const double s = step_ms(logits, *c.params, c.threads, static_cast<uint64_t>(rep), out);
      ms.push_back(s), greedy_ms.push_back(g), ratio.push_back(s / g);
    }
    std::printf("%-38s | %10.3f | %10.3f | %7.2fx\n", c.name, median(ms), median(greedy_ms), median(ratio));
  }
  // Which level decided the draws (this thread's; the 1-thread cases), over all repeats.
  fast_sampler_counts() = {};
  for (int rep = 0; rep < repeats; ++rep) step_ms(logits, temp, 1, 1000 + static_cast<uint64_t>(rep), out);
  const FastSamplerCounts& n = fast_sampler_counts();
  std::printf("temperature 0.8 draws decided at 8 / 12 / 16 nats / exact: %lld / %lld / %lld / %lld\n",
              (long long)n.level[0], (long long)n.level[1], (long long)n.level[2], (long long)n.level[3]);
  // The old sampler, a full sort of every row, once.
  const double g = step_ms(logits, greedy, 1, 0, out);
  const double t0 = now_ms();
  for (int64_t r = 0; r < kRows; ++r)
    out[r] = sample_token_reference(logits.data() + r * kVocab, kVocab, temp, static_cast<uint64_t>(r), 0, 0);
  const double full = now_ms() - t0;
  std::printf("%-38s | %10.3f | %10.3f | %7.2fx\n", "full sort (the old sampler), 1 thread", full, g, full / g);
  return 0;
}
