#pragma once
// The logit scans of logit_scan.h for one vector width F (GCC vector extension of floats), written
// once: logit_scan.cpp instantiates them for 4 lanes (the baseline ISA), logit_scan_avx2.cpp for 8
// and logit_scan_avx512.cpp for 16 after raising their ISA. Internal linkage and no standard
// library calls, for the reason bound_exp.h gives; the files include the standard headers first.
#include <cstdint>
#include <cstring>

#include "engine/bound_exp.h"
#include "engine/logit_scan.h"

namespace tpbatch {
namespace {

template <class F>
constexpr int64_t kLanesOf = sizeof(F) / sizeof(float);

template <class F>
inline F load_lanes(const float* p) {
  F v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// NaN never wins: the maximum of the other values.
inline float larger(float a, float b) { return b > a ? b : a; }

template <class F>
inline float lanes_max(F v) {
  float m = v[0];
  for (int64_t j = 1; j < kLanesOf<F>; ++j) m = larger(m, v[j]);
  return m;
}

template <class F>
float max_logit_kernel(const float* logits, int64_t n) {
  constexpr int64_t L = kLanesOf<F>;
  float m = -__builtin_inff();
  int64_t i = 0;
  if (n >= 2 * L) {
    F a = load_lanes<F>(logits), b = load_lanes<F>(logits + L);
    for (i = 2 * L; i + 2 * L <= n; i += 2 * L) {
      const F x = load_lanes<F>(logits + i), y = load_lanes<F>(logits + i + L);
      a = x > a ? x : a;
      b = y > b ? y : b;
    }
    m = lanes_max<F>(b > a ? b : a);
  }
  for (; i < n; ++i) m = larger(m, logits[i]);
  return m;
}

// Blocks of kScanLaneTerms per lane: a float sum per lane, then the lanes added in turn.
template <class F>
TailScan scan_tail_kernel(const float* logits, int64_t n, float mx, float scale, float t, float below, bool sums,
                          int32_t* ids) {
  constexpr int64_t L = kLanesOf<F>;
  constexpr int64_t kScanBlock = kScanLaneTerms * L;
  static_assert(L <= kScanMaxLanes);
  using I = IntLanes<F>;
  TailScan out{0.0, 0, false, -__builtin_inff()};
  const F vmx = F{} + mx, vscale = F{} + scale, vt = F{} + t;
  F best = F{} - __builtin_inff();
  int64_t b = 0;
  for (; b + kScanBlock <= n; b += kScanBlock) {
    F sum{}, top = F{} - __builtin_inff();
    I nan{};
    for (int64_t i = b; i < b + kScanBlock; i += L) {
      const F l = load_lanes<F>(logits + i);
      if (sums) sum += l < vt ? bound_exp2((l - vmx) * vscale) : F{};
      top = l > top ? l : top;
      nan |= l != l;
    }
    float s = 0;
    bool odd = false;
    for (int64_t j = 0; j < L; ++j) s += sum[j], odd |= nan[j] != 0;
    out.sum += static_cast<double>(s);
    out.nan |= odd;
    best = top > best ? top : best;
    for (int64_t j = 0; j < L; ++j)  // only the lanes that saw a logit >= t
      if (top[j] >= t)
        for (int64_t i = b + j; i < b + kScanBlock; i += L)
          if (logits[i] >= t && logits[i] < below) ids[out.count++] = static_cast<int32_t>(i);
  }
  double rest = 0;  // the last partial block, one lane
  for (int64_t i = b; i < n; ++i) {
    const float l = logits[i];
    if (sums && l < t) rest += bound_exp2((l - mx) * scale);
    if (l >= t && l < below) ids[out.count++] = static_cast<int32_t>(i);
    out.nan |= l != l;
    out.max = larger(out.max, l);
  }
  out.sum += rest;
  out.max = larger(out.max, lanes_max<F>(best));
  return out;
}

}  // namespace
}  // namespace tpbatch
