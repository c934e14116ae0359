#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/logit_scan.h"
#include "engine/sampler_fast.h"

namespace tpbatch {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The distinct ids of `tokens` inside [0, vocab), sorted, with how often each occurs; kept per
// thread so a step's rows reuse it.
struct TokenCounts {
  std::vector<int32_t> ids;
  std::vector<int64_t> counts;
  void count(std::span<const int32_t> tokens, int64_t vocab) {
    sorted_.clear();
    for (int32_t t : tokens)
      if (t >= 0 && t < vocab) sorted_.push_back(t);
    std::sort(sorted_.begin(), sorted_.end());
    ids.clear();
    counts.clear();
    for (size_t i = 0; i < sorted_.size(); ++i) {
      if (i == 0 || sorted_[i] != sorted_[i - 1]) ids.push_back(sorted_[i]), counts.push_back(0);
      ++counts.back();
    }
  }

 private:
  std::vector<int32_t> sorted_;
};

thread_local TokenCounts token_counts;

}  // namespace

double counter_uniform(uint64_t seed, uint64_t row, uint64_t step, uint64_t sample) {
  uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ row) ^ step);
  if (sample != 0) h = splitmix64(h ^ splitmix64(sample));  // sample 0: the stream rows had before n
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t row, uint64_t step,
                     uint64_t sample, std::optional<float> row_max) {
  if (p.greedy()) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  return sample_token_fast(logits, vocab, p, row, step, sample, row_max);
}

void apply_penalties(float* logits, int64_t vocab, const SamplingParams& p, std::span<const int32_t> tokens,
                     int64_t prompt_len) {
  TokenCounts& seen = token_counts;
  if (p.repetition_penalty != 1.0) {
    const float rp = static_cast<float>(p.repetition_penalty);
    seen.count(tokens, vocab);
    for (int32_t t : seen.ids) logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
  }
  if (p.presence_penalty != 0.0 || p.frequency_penalty != 0.0) {
    const size_t from = std::min(static_cast<size_t>(std::max<int64_t>(prompt_len, 0)), tokens.size());
    seen.count(tokens.subspan(from), vocab);
    for (size_t i = 0; i < seen.ids.size(); ++i)
      logits[seen.ids[i]] -=
          static_cast<float>(p.frequency_penalty * static_cast<double>(seen.counts[i]) + p.presence_penalty);
  }
}

void mask_tokens(float* logits, int64_t vocab, std::span<const int32_t> ids) {
  for (int32_t t : ids)
    if (t >= 0 && t < vocab) logits[t] = -std::numeric_limits<float>::infinity();
}

std::vector<std::pair<int32_t, float>> top_logprobs(const float* logits, int64_t vocab, int64_t k, float log_z) {
  k = std::min(k, vocab);
  std::vector<std::pair<int32_t, float>> best;  // (id, logit), best first, ties by the lower id
  if (k <= 0) return best;
  best.reserve(static_cast<size_t>(k) + 1);
  // A later id beats a kept token only with a larger logit: it goes before the first smaller one.
  auto offer = [&](int64_t i) {
    const float l = logits[i];
    auto at = std::find_if(best.begin(), best.end(), [&](const auto& b) { return b.second < l; });
    if (static_cast<int64_t>(best.size()) == k) {
      if (at == best.end()) return;
      best.pop_back();
    }
    best.insert(at, {static_cast<int32_t>(i), l});
  };
  int64_t i = 0;
  for (; i < k; ++i) offer(i);
  constexpr int64_t kBlock = 256;  // blocks whose maximum does not beat the k-th best are skipped
  for (; i < vocab; i += kBlock) {
    const int64_t e = std::min(vocab, i + kBlock);
    if (max_logit(logits + i, e - i) > best.back().second)
      for (int64_t j = i; j < e; ++j) offer(j);
  }
  for (auto& b : best) b.second -= log_z;
  return best;
}

}  // namespace tpbatch
