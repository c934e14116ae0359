#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <vector>

namespace tpbatch {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

double counter_uniform(uint64_t seed, uint64_t row, uint64_t step, uint64_t sample) {
  uint64_t h = splitmix64(splitmix64(splitmix64(seed) ^ row) ^ step);
  if (sample != 0) h = splitmix64(h ^ splitmix64(sample));  // sample 0: the stream rows had before n
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

int32_t sample_token(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t row, uint64_t step,
                     uint64_t sample) {
  if (p.greedy()) return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);

  // Candidates sorted by logit (descending, ties by id), cut by top-k, then softmax at temperature.
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  int64_t k = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  if (k < vocab) {
    std::nth_element(ids.begin(), ids.begin() + k, ids.end(), better);
    ids.resize(k);
  }
  std::sort(ids.begin(), ids.end(), better);
  std::vector<double> prob(ids.size());
  const double mx = logits[ids[0]];
  double z = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) z += prob[i] = std::exp((logits[ids[i]] - mx) / p.temperature);
  // top-p: the smallest prefix whose mass reaches top_p (at least one token).
  size_t keep = ids.size();
  if (p.top_p < 1.0) {
    double cum = 0.0;
    for (size_t i = 0; i < ids.size(); ++i) {
      cum += prob[i] / z;
      if (cum >= p.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  // min-p: drop what is less likely than min_p times the most likely token (prob[0]).
  if (p.min_p > 0.0) {
    const double floor = p.min_p * prob[0];
    size_t i = 1;
    while (i < keep && prob[i] >= floor) ++i;
    keep = i;
  }
  double mass = 0.0;
  for (size_t i = 0; i < keep; ++i) mass += prob[i];
  const double u = counter_uniform(p.seed, row, step, sample) * mass;
  double cum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cum += prob[i];
    if (u < cum) return ids[i];
  }
  return ids[keep - 1];
}

void apply_penalties(float* logits, int64_t vocab, const SamplingParams& p, std::span<const int32_t> tokens,
                     int64_t prompt_len) {
  if (p.repetition_penalty != 1.0) {
    std::vector<uint8_t> seen(static_cast<size_t>(vocab), 0);
    const float rp = static_cast<float>(p.repetition_penalty);
    for (int32_t t : tokens) {
      if (t < 0 || t >= vocab || seen[t]) continue;
      seen[t] = 1;
      logits[t] = logits[t] > 0 ? logits[t] / rp : logits[t] * rp;
    }
  }
  if (p.presence_penalty != 0.0 || p.frequency_penalty != 0.0) {
    std::unordered_map<int32_t, int64_t> count;
    for (size_t i = static_cast<size_t>(std::max<int64_t>(prompt_len, 0)); i < tokens.size(); ++i)
      if (tokens[i] >= 0 && tokens[i] < vocab) ++count[tokens[i]];
    for (const auto& [t, c] : count)
      logits[t] -= static_cast<float>(p.frequency_penalty * static_cast<double>(c) + p.presence_penalty);
  }
}

void mask_tokens(float* logits, int64_t vocab, std::span<const int32_t> ids) {
  for (int32_t t : ids)
    if (t >= 0 && t < vocab) logits[t] = -std::numeric_limits<float>::infinity();
}

std::vector<std::pair<int32_t, float>> top_logprobs(const float* logits, int64_t vocab, int64_t k, float log_z) {
  k = std::min(k, vocab);
  std::vector<int32_t> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), better);
  std::vector<std::pair<int32_t, float>> out;
  out.reserve(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) out.emplace_back(ids[i], logits[ids[i]] - log_z);
  return out;
}

}  // namespace tpbatch
