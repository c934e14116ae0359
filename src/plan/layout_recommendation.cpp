#include "plan/layout_recommendation.h"

namespace tpbatch {

void recommend_layouts(Plan& plan, const SpeedReport& speed) {
  const auto& L = plan.layouts;
  plan.throughput.reset();
  plan.latency.reset();
  plan.throughput_tokens_per_s = 0.0;
  for (size_t i = 0; i < L.size() && i < speed.layouts.size(); ++i) {
    const LayoutSpeed& s = speed.layouts[i];
    if (!L[i].fits || !s.predicted) continue;
    if (!plan.throughput || s.p.tokens_per_s_total > plan.throughput_tokens_per_s) {
      plan.throughput = i;
      plan.throughput_tokens_per_s = s.p.tokens_per_s_total;
    }
  }
  for (size_t i = 0; i < L.size(); ++i) {
    if (!L[i].fits) continue;
    if (!plan.latency || L[i].tensor > L[*plan.latency].tensor ||
        (L[i].tensor == L[*plan.latency].tensor && L[i].pipeline < L[*plan.latency].pipeline))
      plan.latency = i;
  }
}

}  // namespace tpbatch
