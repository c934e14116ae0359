#include "model/logit_combine.h"

#include <cmath>
#include <limits>

namespace tpbatch {

void combine_logit_stats(std::span<const LogitStats> all, int64_t stride, int64_t n, int tp, LogitResult* results) {
  for (int64_t i = 0; i < n; ++i) {
    LogitResult& res = results[i];
    float mx = -std::numeric_limits<float>::infinity();
    int32_t arg = 0;
    float target = std::numeric_limits<float>::quiet_NaN();
    for (int r = 0; r < tp; ++r) {  // shards are in vocabulary order: the first maximum is the lowest id
      const LogitStats& st = all[r * stride + i];
      if (st.max_logit > mx) mx = st.max_logit, arg = st.argmax;
      if (!std::isnan(st.target_logit)) target = st.target_logit;
    }
    double z = 0.0;
    for (int r = 0; r < tp; ++r) z += all[r * stride + i].sum_exp * std::exp(static_cast<double>(all[r * stride + i].max_logit) - mx);
    res.argmax = arg;
    res.max_logit = mx;
    res.log_z = static_cast<float>(mx + std::log(z));
    res.target_logit = target;
  }
}

void combine_allowed_maxima(std::span<const LogitStats> all, int64_t stride, int64_t first, int64_t n, int tp,
                            std::span<LogitResult* const> results) {
  for (int64_t i = 0; i < n; ++i) {
    float mx = -std::numeric_limits<float>::infinity();
    int32_t arg = -1;
    for (int r = 0; r < tp; ++r) {  // in vocabulary order; an all -inf shard is never strictly greater
      const LogitStats& st = all[r * stride + first + i];
      if (st.max_logit > mx) mx = st.max_logit, arg = st.argmax;
    }
    results[i]->allowed_argmax = arg;
    results[i]->allowed_max_logit = mx;
  }
}

}  // namespace tpbatch
