#pragma once
// Checks on a checkpoint beyond its header: values and coverage.
//  - Every tensor is scanned for NaN and Inf once at load (the ranks share the scan: tensor i is
//    read by rank i mod world size), so one corrupt value fails the job naming the tensor instead
//    of turning every row into token 0 with NaN logprobs.
//  - Tensors of layers the config does not use (num_hidden_layers smaller than the checkpoint)
//    are reported in a warning naming them.
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace tpbatch {

// Throws Error "<file>: tensor '<name>': element <i> is NaN|Inf" for the first bad value among the
// tensors this rank scans.
void check_weights_finite(const WeightStore& weights, int rank, int ranks);

// Names of tensors under model.layers.N. with N >= cfg.num_layers, in name order.
std::vector<std::string> unused_layer_tensors(const WeightStore& weights, const ModelConfig& cfg);

// The warning text for unused tensors ("" when there are none).
std::string unused_tensors_warning(const std::vector<std::string>& names, const ModelConfig& cfg);

}  // namespace tpbatch
