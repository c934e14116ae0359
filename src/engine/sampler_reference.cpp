#include "engine/sampler_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/sampler.h"

namespace tpbatch {

int32_t sample_token_reference(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t row,
                               uint64_t step, uint64_t sample) {
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

}  // namespace tpbatch
