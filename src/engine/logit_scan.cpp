#include "engine/logit_scan.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "engine/bound_exp.h"

namespace tpbatch {
namespace {

constexpr int64_t kBlock = 128;

f32x4 load(const float* p) {
  f32x4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float lane_max(f32x4 v) { return std::max(std::max(v[0], v[1]), std::max(v[2], v[3])); }

}  // namespace

float max_logit(const float* logits, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  if (n >= 8) {
    f32x4 a = load(logits), b = load(logits + 4);
    for (i = 8; i + 8 <= n; i += 8) {
      const f32x4 x = load(logits + i), y = load(logits + i + 4);
      a = a > x ? a : x;
      b = b > y ? b : y;
    }
    m = lane_max(a > b ? a : b);
  }
  for (; i < n; ++i) m = std::max(m, logits[i]);
  return m;
}

TailScan scan_tail(const float* logits, int64_t n, float mx, float scale, float t, float below,
                   std::vector<int32_t>& ids) {
  TailScan out;
  const f32x4 vmx = f32x4{} + mx, vscale = f32x4{} + scale, vt = f32x4{} + t, vbelow = f32x4{} + below;
  int64_t b = 0;
  for (; b + kBlock <= n; b += kBlock) {
    f32x4 sum{}, hit{};  // hit: lanes with a logit in [t, below) (all bits set)
    i32x4 nan{};
    for (int64_t i = b; i < b + kBlock; i += 4) {
      const f32x4 l = load(logits + i);
      const f32x4 q = bound_exp2((l - vmx) * vscale);
      const auto tail = l < vt;
      sum += tail ? q : f32x4{};
      hit = (l >= vt && l < vbelow) ? f32x4{} + 1.0f : hit;
      nan |= l != l;
    }
    out.sum += static_cast<double>((sum[0] + sum[1]) + (sum[2] + sum[3]));
    out.nan |= (nan[0] | nan[1] | nan[2] | nan[3]) != 0;
    if (lane_max(hit) > 0)
      for (int64_t i = b; i < b + kBlock; ++i)
        if (logits[i] >= t && logits[i] < below) ids.push_back(static_cast<int32_t>(i));
  }
  double rest = 0;  // the last partial block, one lane
  for (int64_t i = b; i < n; ++i) {
    const float l = logits[i];
    if (l < t) rest += bound_exp2((l - mx) * scale);
    if (l >= t && l < below) ids.push_back(static_cast<int32_t>(i));
    out.nan |= l != l;
  }
  out.sum += rest;
  return out;
}

}  // namespace tpbatch
