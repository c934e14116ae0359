#pragma once
// RoPE's rotation frequencies for a model, as Hugging Face's rope initialisers compute them.
#include <cstdint>
#include <vector>

#include "model/config.h"

namespace tpbatch {

// RoPE inverse frequencies (head_dim/2 of them), rope_scaling applied as Hugging Face does.
std::vector<double> rope_inverse_frequencies(const ModelConfig& config);
// Phi-3 longrope: a sequence longer than this many tokens (original_max_position_embeddings) turns
// every position, its first ones included, by the long factors, as Hugging Face chooses them from
// the whole sequence's length; 0 when the model never switches (another rope, or no longer context).
int64_t rope_long_factors_after(const ModelConfig& config);
// The frequencies of those longer sequences: longrope's long_factor in place of short_factor.
std::vector<double> rope_long_inverse_frequencies(const ModelConfig& config);
// The local (sliding) layers' frequencies: Gemma 3's rope_local_base_freq, never scaled.
std::vector<double> rope_local_inverse_frequencies(const ModelConfig& config);
// Hugging Face's `attention_scaling` of the rope type (multiplies cos and sin, so q·k by its
// square): yarn's mscale and longrope's attention factor; 1 otherwise.
double rope_attention_factor(const ModelConfig& config);

}  // namespace tpbatch
