#include "model/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "common/error.h"

namespace tpbatch {

std::vector<double> rope_inverse_frequencies(const ModelConfig& config) {
  const int64_t dim = config.head_dim;
  if (dim <= 0 || dim % 2 != 0) throw Error("rope: head_dim must be positive and even, got " + std::to_string(dim));
  const double theta = config.rope_theta;
  std::vector<double> inv(size_t(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) inv[size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(dim));

  const RopeScaling& rs = config.rope_scaling;
  if (rs.type == "none" || rs.type == "default") return inv;
  if (rs.type == "linear") {
    for (double& f : inv) f /= rs.factor;
    return inv;
  }
  if (rs.type == "llama3") {
    // transformers' _compute_llama3_parameters.
    const double orig = double(rs.original_max_position_embeddings);
    const double low_freq_wavelen = orig / rs.low_freq_factor;
    const double high_freq_wavelen = orig / rs.high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f = f / rs.factor;
      } else if (wavelen < high_freq_wavelen) {
        // unchanged
      } else {
        const double smooth = (orig / wavelen - rs.low_freq_factor) / (rs.high_freq_factor - rs.low_freq_factor);
        f = (1.0 - smooth) * f / rs.factor + smooth * f;
      }
    }
    return inv;
  }
  if (rs.type == "dynamic") return inv;  // see parse_rope_scaling: unchanged within the context
  if (rs.type == "longrope") {
    for (size_t i = 0; i < inv.size(); ++i) inv[i] /= rs.short_factor.at(i);
    return inv;
  }
  if (rs.type == "yarn") {
    // transformers' _compute_yarn_parameters: extrapolated (unscaled) high frequencies, interpolated
    // (divided by factor) low ones, a linear ramp between the correction dimensions.
    const double orig = double(rs.original_max_position_embeddings);
    auto correction_dim = [&](double rotations) {
      return double(dim) * std::log(orig / (rotations * 2.0 * std::numbers::pi)) / (2.0 * std::log(theta));
    };
    double low = correction_dim(rs.beta_fast), high = correction_dim(rs.beta_slow);
    if (rs.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, double(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < dim / 2; ++i) {
      const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
      const double extrapolation = 1.0 - ramp;
      const double f = inv[size_t(i)];
      inv[size_t(i)] = f / rs.factor * (1.0 - extrapolation) + f * extrapolation;
    }
    return inv;
  }
  throw Error("rope: unsupported rope scaling type '" + rs.type + "'");
}

int64_t rope_long_factors_after(const ModelConfig& config) {
  const RopeScaling& rs = config.rope_scaling;
  if (rs.type != "longrope" || config.max_position_embeddings <= rs.original_max_position_embeddings) return 0;
  return rs.original_max_position_embeddings;
}

std::vector<double> rope_long_inverse_frequencies(const ModelConfig& config) {
  if (rope_long_factors_after(config) == 0) throw Error("rope: the model has no long rope factors");
  ModelConfig long_factors = config;
  long_factors.rope_scaling.short_factor = config.rope_scaling.long_factor;
  return rope_inverse_frequencies(long_factors);
}

std::vector<double> rope_local_inverse_frequencies(const ModelConfig& config) {
  if (config.rope_local_theta <= 0) return rope_inverse_frequencies(config);
  ModelConfig local = config;
  local.rope_theta = config.rope_local_theta;
  local.rope_scaling = RopeScaling{};
  return rope_inverse_frequencies(local);
}

double rope_attention_factor(const ModelConfig& config) {
  const RopeScaling& rs = config.rope_scaling;
  if ((rs.type == "yarn" || rs.type == "longrope") && rs.attention_factor > 0) return rs.attention_factor;
  return 1.0;
}

}  // namespace tpbatch
