#pragma once
// 4-bit checkpoints' packed tensors read into the one form the loader keeps: int4 values two per
// byte (low nibble first) in the Hugging Face [out, in] layout, and per output row one fp32 scale
// and one fp32 zero point per group of input columns: weight = (q - zero) * scale.
// The packings (model/quantization.h names the configs), checked against the tools that write them:
//   awq (AutoAWQ WQLinear_GEMM.from_linear; GPTQModel's AWQ_ORDER / AWQ_REVERSE_ORDER):
//     X.qweight I32 [K, N/8], output column 8j + order[i] in bits 4i of word j, order =
//     0,2,4,6,1,3,5,7; X.qzeros I32 [K/g, N/8] in the same order; X.scales F16 [K/g, N].
//   gptq (AutoGPTQ / GPTQModel QuantLinear.pack): X.qweight I32 [K/8, N], input row 8i + b in
//     bits 4b of word i; X.qzeros I32 [K/g, N/8], output column 8j + b in bits 4b, holding
//     zero - 1 in checkpoint_format gptq (zero itself in gptq_v2); X.scales F16 [K/g, N];
//     X.g_idx I32 [K] (column -> group; must be column / g: act-order layouts are refused).
//   compressed-tensors pack-quantized (pack_to_int32): X.weight_packed I32 [N, ceil(K/8)], input
//     column 8i + b in bits 4b of word i, holding value + 8 (symmetric: zero 8 unsigned);
//     X.weight_scale [N, K/g] (the model's float dtype); X.weight_shape I64 [2] = [N, K].
#include <cstdint>
#include <string>
#include <vector>

#include "model/quantization.h"
#include "model/safetensors.h"

namespace tpbatch {

// Lists each 4-bit weight under its plain name ("X.weight", dtype I4, shape [N, K]) from its
// X.qweight / X.weight_packed, so shape checks and staging see one tensor. Throws naming the
// tensor or key when the packed shape is not the format's or the group size does not divide K.
void add_int4_weights(WeightStore& w, const QuantizationConfig& q);

// Rows [row0, row0 + nrows) x input columns [col0, col0 + ncols) of a logical I4 weight.
struct Int4Slice {
  std::vector<uint8_t> values;        // [nrows][(ncols + 1) / 2]
  std::vector<float> scales, zeros;   // [nrows][groups]
  int64_t groups = 1, group = 1, phase = 0;  // column 0 at `phase` in its group of `group`
};
Int4Slice read_int4_slice(const WeightStore& w, const QuantizationConfig& q, const TensorInfo& weight, int64_t row0,
                          int64_t nrows, int64_t col0, int64_t ncols);

}  // namespace tpbatch
