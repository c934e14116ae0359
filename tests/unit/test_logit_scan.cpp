// The sampler's logit scans (engine/logit_scan.h) at every vector width this CPU runs: the same
// maximum (NaNs left out), set of candidate ids and NaN flag as the baseline's, and a tail sum
// within the stated error of the same bound_exp2 terms added in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/bound_exp.h"
#include "engine/logit_scan.h"

namespace {

using tpbatch::ScanIsa;

std::vector<ScanIsa> isas_here() {
  std::vector<ScanIsa> out = {ScanIsa::kBaseline};
  if (tpbatch::best_scan_isa() != ScanIsa::kBaseline) out.push_back(ScanIsa::kAvx2);
  if (tpbatch::best_scan_isa() == ScanIsa::kAvx512) out.push_back(ScanIsa::kAvx512);
  return out;
}

std::vector<float> row(std::mt19937& rng, int64_t n, bool with_nan) {
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::vector<float> l(static_cast<size_t>(n));
  for (float& v : l) v = normal(rng);
  for (int i = 0; i < 5 && n > 0; ++i) l[rng() % l.size()] = -std::numeric_limits<float>::infinity();
  if (with_nan && n > 0) l[rng() % l.size()] = std::numeric_limits<float>::quiet_NaN();
  return l;
}

TEST(LogitScan, EveryWidthFindsTheSameCandidatesAndBoundsTheSameSum) {
  std::mt19937 rng(9);
  for (int64_t n : {0, 1, 5, 127, 128, 129, 1000, 4099, 128256}) {
    for (bool with_nan : {false, true}) {
      const std::vector<float> l = row(rng, n, with_nan);
      const float mx = tpbatch::max_logit(l.data(), n, ScanIsa::kBaseline);
      const float scale = 1.8f, t = mx - 6.0f, below = mx - 1.0f;
      double exact = 0;  // the same terms, added in double
      for (float v : l)
        if (v < t) exact += tpbatch::bound_exp2((v - mx) * scale);
      std::vector<int32_t> want(static_cast<size_t>(n) + 1), got(want.size());
      const tpbatch::TailScan base = tpbatch::scan_tail(l.data(), n, mx, scale, t, below, true, want.data(),
                                                        ScanIsa::kBaseline);
      EXPECT_EQ(base.nan, with_nan && n > 0) << n;
      for (ScanIsa isa : isas_here()) {
        const int w = static_cast<int>(isa);
        EXPECT_EQ(tpbatch::max_logit(l.data(), n, isa), mx) << "isa " << w << " n " << n;
        const tpbatch::TailScan s = tpbatch::scan_tail(l.data(), n, mx, scale, t, below, true, got.data(), isa);
        EXPECT_EQ(s.nan, base.nan) << "isa " << w << " n " << n;
        EXPECT_EQ(s.max, mx) << "isa " << w << " n " << n;
        ASSERT_EQ(s.count, base.count) << "isa " << w << " n " << n;
        std::sort(got.begin(), got.begin() + s.count);
        std::sort(want.begin(), want.begin() + base.count);
        EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + s.count),
                  std::vector<int32_t>(want.begin(), want.begin() + base.count));
        EXPECT_LE(std::fabs(s.sum - exact), tpbatch::kScanSumRelError * exact) << "isa " << w << " n " << n;
        const tpbatch::TailScan no_sum = tpbatch::scan_tail(l.data(), n, mx, scale, t, below, false, got.data(), isa);
        EXPECT_EQ(no_sum.sum, 0.0);
        EXPECT_EQ(no_sum.count, s.count);
      }
    }
  }
}

}  // namespace
