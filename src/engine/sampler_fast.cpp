#include "engine/sampler_fast.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <vector>

#include "engine/bound_exp.h"
#include "engine/logit_scan.h"
#include "engine/sampler.h"
#include "engine/sampler_reference.h"

namespace tpbatch {
namespace {

constexpr int kLevels = 4;                              // three bounded levels, then the exact one
constexpr double kLevelNats[kLevels - 1] = {8.0, 12.0, 16.0};
constexpr double kExactNats = 37.0;                     // e^-37 = 8.5e-17 < 2^-53
constexpr double kRound = 0x1.0p-53;                    // double's unit roundoff
// The tail sum's relative error: bound_exp2 (kBoundExp2RelError, 5e-6), its float argument
// ((l - max) * (log2 e / T): three roundings, |x| <= 115, so 2^(115 * 3 * 2^-24) - 1 = 1.43e-5) and
// the scan's float sums (kScanSumRelError, 2.9e-6): 2.2e-5; 5e-5 leaves room. Flushed terms (2^x
// with x < -115 gives 0) are off by at most kFlushed each (2^-115 = 2.41e-35, plus the argument's
// error).
constexpr double kTailRelError = 5e-5;
constexpr double kFlushed = 2.5e-35;
static_assert(kTailRelError >= 2 * (kBoundExp2RelError + 1.43e-5 + kScanSumRelError));

struct Candidates {
  std::vector<int32_t> ids;    // a level's new candidates, as scanned
  std::vector<uint64_t> keys;  // sorted by (logit desc, id asc), then the next level's unsorted
  std::vector<double> prob;    // p of keys[i], as the reference computes it
  std::vector<double> cum;     // running sum of prob through i, in order
};

// Ascending keys give the reference's order. -0 and +0 are one logit to it: both map as +0.
uint64_t sort_key(float logit, int64_t id) {
  uint32_t b = std::bit_cast<uint32_t>(logit + 0.0f);
  b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);  // unsigned order = float order
  return (static_cast<uint64_t>(~b) << 32) | static_cast<uint32_t>(id);
}
int32_t key_id(uint64_t key) { return static_cast<int32_t>(key & 0xffffffffu); }

// What the draw knows of the tokens below the candidates.
struct Tail {
  int64_t count = 0;
  double lo = 0, hi = 0;  // bounds on the sum of their p
  double p_max = 0;       // bound on any one p
  bool vanishing = false; // every p < 2^-53: each addition to a sum >= 1 is a no-op
};

// top-p's cut at normalizer z: the reference's loop over the first h candidates; 0 if not among them.
int64_t top_p_cut(const double* prob, int64_t h, double z, double top_p) {
  double cum = 0.0;
  for (int64_t i = 0; i < h; ++i) {
    cum += prob[i] / z;
    if (cum >= top_p) return i + 1;
  }
  return 0;
}

// The reference's token if the bounds decide it. n candidates, sorted, with their prob and cum.
std::optional<int32_t> decide(const Candidates& c, int64_t n, int64_t vocab, const SamplingParams& p, double draw,
                              const Tail& tail) {
  const double* prob = c.prob.data();
  const double* cum = c.cum.data();
  const int64_t list = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;  // the reference's candidates
  const int64_t h = std::min(list, n);
  const int64_t rest = list - h;  // its candidates among the tail, each summed after cum[h - 1]
  const double sum_h = cum[h - 1];
  const bool exact = rest == 0 || tail.vanishing;
  double z_lo = sum_h, z_hi = sum_h;
  if (!exact) {
    // rest additions, each rounding by at most kRound relative, and 3 roundings of these bounds.
    const double slop = static_cast<double>(rest + 8) * 2 * kRound;
    const double add_lo = rest == tail.count ? tail.lo : 0.0;  // a part of the tail may sum to ~0
    z_lo = std::max(sum_h, (sum_h + add_lo) * (1.0 - slop));
    z_hi = (sum_h + tail.hi) * (1.0 + slop);
  }
  bool beyond = rest > 0;  // the kept prefix reaches into the tail
  bool whole = beyond;     // ... and is the whole list: mass is z
  int64_t keep = h;
  if (p.top_p < 1.0) {
    const int64_t cut = top_p_cut(prob, h, z_lo, p.top_p);
    if (!exact && top_p_cut(prob, h, z_hi, p.top_p) != cut) return std::nullopt;
    if (cut > 0) keep = cut, beyond = false;
    whole = false;  // a cut among the tail's tokens is not excluded
  }
  if (p.min_p > 0.0) {
    const double floor = p.min_p * prob[0];
    int64_t i = 1;
    while (i < keep && prob[i] >= floor) ++i;
    if (i < keep) {
      keep = i, beyond = false;
    } else if (beyond && floor > tail.p_max) {
      beyond = false;  // the first tail candidate is below the floor: the cut is right after h
    }
    whole = whole && !(floor <= tail.p_max);
  }
  double mass_lo = cum[keep - 1], mass_hi = mass_lo;
  if (beyond && !tail.vanishing) {
    mass_hi = z_hi;
    if (whole) mass_lo = z_lo;  // else a prefix of the list: at least sum_h
  }
  const double u_lo = draw * mass_lo, u_hi = draw * mass_hi;
  const double* end = cum + keep;
  const double* at = std::upper_bound(cum, end, u_lo);  // the first running sum > u
  if (at == end) {
    // The reference then returns its last kept candidate; known only when nothing is uncertain.
    if (!beyond && mass_lo == mass_hi) return key_id(c.keys[keep - 1]);
    return std::nullopt;
  }
  if (mass_hi != mass_lo && std::upper_bound(at, end, u_hi) != at) return std::nullopt;
  return key_id(c.keys[at - cum]);
}

// Sorts keys[from, end), computes their prob and cum after the first `from`.
void extend(Candidates& c, size_t from, const float* logits, double mx, double t) {
  std::sort(c.keys.begin() + static_cast<std::ptrdiff_t>(from), c.keys.end());
  const size_t n = c.keys.size();
  c.prob.resize(n);
  c.cum.resize(n);
  double cum = from > 0 ? c.cum[from - 1] : 0.0;
  for (size_t i = from; i < n; ++i) {
    c.prob[i] = std::exp((logits[key_id(c.keys[i])] - mx) / t);  // the reference's expression
    c.cum[i] = cum += c.prob[i];
  }
}

// A float t with every float l < t at (l - mx) / T <= -kExactNats as the reference computes it
// ((l - mx) / T is monotone in l, so checking the float below t checks them all); -inf if none found.
float exact_threshold(double mx, double T) {
  float t = static_cast<float>(mx - (kExactNats + 0.5) * T);
  for (int tries = 0; std::isfinite(t) && tries < 64; ++tries) {
    const float below = std::nextafter(t, -std::numeric_limits<float>::infinity());
    if ((below - mx) / T <= -kExactNats) return t;
    t = below;
  }
  return -std::numeric_limits<float>::infinity();
}

thread_local FastSamplerCounts counts;
thread_local Candidates scratch;

// The draw at maximum mx (finite), level by level; nullopt when the first scan finds the row's
// maximum is not mx, which it then holds (so the caller starts again with it).
std::optional<int32_t> draw_by_levels(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t row,
                                      uint64_t step, uint64_t sample, float& mxf) {
  const double mx = mxf, T = p.temperature;
  // Level thresholds, decreasing; a level at or below the exact one's leaves only vanishing p out.
  float t[kLevels];
  t[kLevels - 1] = exact_threshold(mx, T);
  for (int k = 0; k < kLevels - 1; ++k) {
    t[k] = std::max(static_cast<float>(mx - kLevelNats[k] * T), t[kLevels - 1]);
    if (k > 0) t[k] = std::min(t[k], t[k - 1]);
  }

  Candidates& c = scratch;
  c.keys.clear();
  if (c.ids.size() < static_cast<size_t>(vocab)) c.ids.resize(static_cast<size_t>(vocab));
  const float scale = static_cast<float>(std::numbers::log2e / T);  // (l - mx) * scale = log2 of p
  const double draw = counter_uniform(p.seed, row, step, sample);
  for (int k = 0; k < kLevels; ++k) {
    if (k > 0 && t[k] == t[k - 1]) continue;
    // This level's new candidates, [t[k], t[k - 1]), and the bound on the sum below t[k]. A top-k
    // list within the candidates, and the exact level, need no tail sum; the first only when the
    // candidates fall short of top_k.
    const float above = k > 0 ? t[k - 1] : std::numeric_limits<float>::infinity();
    const bool vanishing = t[k] <= t[kLevels - 1];
    const bool sums = !(p.top_k > 0 && p.top_k < vocab) && !vanishing;
    TailScan scan = scan_tail(logits, vocab, mxf, scale, t[k], above, sums, c.ids.data());
    if (scan.nan) {
      ++counts.reference;
      return sample_token_reference(logits, vocab, p, row, step, sample);
    }
    if (k == 0 && scan.max != mxf) {
      mxf = scan.max;
      return std::nullopt;
    }
    const size_t from = c.keys.size();
    for (int64_t i = 0; i < scan.count; ++i) c.keys.push_back(sort_key(logits[c.ids[i]], c.ids[i]));
    extend(c, from, logits, mx, T);
    if (!sums && !vanishing && static_cast<int64_t>(c.keys.size()) < p.top_k)
      scan.sum = scan_tail(logits, vocab, mxf, scale, t[k], t[k], true, c.ids.data()).sum;

    const int64_t n = static_cast<int64_t>(c.keys.size());
    Tail tail;
    tail.count = vocab - n;
    tail.vanishing = vanishing;
    if (vanishing) {
      tail.p_max = 0x1.0p-53;
    } else {
      const double flushed = static_cast<double>(tail.count) * kFlushed;
      tail.lo = std::max(0.0, scan.sum * (1.0 - kTailRelError) - flushed);
      tail.hi = scan.sum * (1.0 + kTailRelError) + flushed;
      // Every tail l < t[k], so its p <= exp at t[k], and glibc's exp is within an ulp of e^x.
      tail.p_max = std::exp((t[k] - mx) / T) * (1.0 + 0x1.0p-50);
    }
    if (std::optional<int32_t> token = decide(c, n, vocab, p, draw, tail)) {
      ++counts.level[k];
      return token;
    }
  }
  ++counts.reference;  // not reached: the exact level decides
  return sample_token_reference(logits, vocab, p, row, step, sample);
}

}  // namespace

FastSamplerCounts& fast_sampler_counts() { return counts; }

int32_t sample_token_fast(const float* logits, int64_t vocab, const SamplingParams& p, uint64_t row, uint64_t step,
                          uint64_t sample, std::optional<float> row_max) {
  float mxf = row_max ? *row_max : vocab > 0 ? max_logit(logits, vocab) : 0.0f;
  for (;;) {  // twice at most: the first scan corrects a wrong row_max
    if (vocab <= 0 || !std::isfinite(mxf) || !(p.temperature > 0) || !std::isfinite(p.temperature)) {
      ++counts.reference;
      return sample_token_reference(logits, vocab, p, row, step, sample);
    }
    if (std::optional<int32_t> token = draw_by_levels(logits, vocab, p, row, step, sample, mxf)) return *token;
  }
}

}  // namespace tpbatch
