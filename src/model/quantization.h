#pragma once
// How a checkpoint's linear layers are quantized, from config.json's quantization_config, and where
// each quantized weight's scales are. What runs:
//  8-bit float (e4m3) weights with fp32 scales per tensor, per output channel or per block:
//   quant_method: fp8 with weight_block_size [bn, bk] (DeepSeek / Qwen3-FP8): X.weight_scale_inv
//     [ceil(N/bn), ceil(K/bk)] (the factor the fp8 values are multiplied by, despite the name);
//   quant_method: compressed-tensors, float 8-bit weights (strategy tensor, channel or block):
//     X.weight_scale [1] (or []), [N, 1] or [ceil(N/bn), ceil(K/bk)].
//  4-bit integer weights with a scale and a zero point per output row and group of g input
//  columns, weight = (q - zero) * scale (model/int4_checkpoint.h reads the packed tensors):
//   quant_method: awq (version gemm), gptq (sym or not; checkpoint_format gptq stores zero - 1,
//     gptq_v2 the zero itself; desc_act only with a trivial g_idx), and compressed-tensors
//     pack-quantized int 4-bit symmetric weights (W4A16; zero 8 in the unsigned packing).
//  8-bit integer weights with activations quantized to 8 bits per token (W8A8):
//   quant_method: compressed-tensors, format int-quantized, int 8-bit symmetric weights (strategy
//     channel or tensor) with dynamic per-token symmetric int 8-bit input_activations: I8
//     X.weight [N, K] and X.weight_scale [N, 1] ([1] per tensor). The GEMM quantizes each row of
//     x itself (backend/cpu/gemm/gemm_int8.cpp), so the result differs from the dequantized
//     weights' by that rounding. Static activation scales, asymmetric or group-wise int8 are
//     refused naming the key.
// Other activations stay fp32 on the CPU whatever the activation scheme says (static input_scale
// tensors are not read), so the result is the dequantized weights' to fp32 accumulation order.
// Recognised but not run yet (refused naming the key): asymmetric pack-quantized, AWQ's gemv /
// exllama / marlin packings. Anything else is refused naming quant_method.
// Which tensors are quantized is read from the checkpoint: an F8_E4M3 or I8 tensor is, and must
// have its scales; so is a 4-bit one (its X.qweight / X.weight_packed); the config's ignore lists
// (lm_head, ...) are the tensors the quantizer left in 16 bits.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "backend/dtype.h"

namespace tpbatch {

enum class ScaleGranularity : uint8_t { Tensor, Channel, Block };
// How a 4-bit checkpoint packs its values (model/int4_checkpoint.h).
enum class Int4Packing : uint8_t { None, Awq, Gptq, PackQuantized };

struct QuantizationConfig {
  std::string method;  // "" when the checkpoint is not quantized, else "fp8" | "compressed-tensors"
  ScaleGranularity granularity = ScaleGranularity::Tensor;
  int64_t block_rows = 0, block_cols = 0;  // Block: output rows x input columns per scale
  std::vector<std::string> ignore;         // modules the config says stay unquantized
  // How ignore's entries match a module name: compressed-tensors' `ignore` holds names and "re:"
  // patterns; transformers' modules_to_not_convert (fp8, awq, gptq) holds parts of names.
  bool ignore_by_part = false;
  // 4-bit: the packing, scale groups of `group_size` input columns (granularity Block with
  // block_rows 1, or Channel for the whole row), whether qzeros store zero - 1 (GPTQ's classic
  // format), and GPTQ's act-order flag (run only where g_idx is the plain column / group_size).
  int bits = 8;
  Int4Packing packing = Int4Packing::None;
  int64_t group_size = 0;
  bool zeros_minus_one = false;
  bool desc_act = false;
  // W8A8: 8-bit integer weights, activations quantized per token inside the GEMM.
  bool int8 = false;
  bool quantized() const { return !method.empty(); }
  // Whether the config leaves `module` ("model.layers.0.mlp.down_proj") unquantized: an `ignore`
  // entry equal to it, or "re:P" with P matching from the name's start (Python's re.match, as
  // compressed-tensors matches); a modules_to_not_convert entry contained in it (as transformers
  // matches). `plan` counts such projections in the weights' dtype, as the loader keeps them.
  bool leaves_unquantized(const std::string& module) const;
  bool int4() const { return bits == 4; }
  // The type the loader keeps the quantized weights' values in: F8_E4M3, I8 or I4.
  DType value_dtype() const { return int4() ? DType::I4 : int8 ? DType::I8 : DType::F8E4M3; }
  // The scale tensor of a quantized weight ("....q_proj.weight" -> "....q_proj.weight_scale_inv").
  std::string scale_tensor_name(const std::string& weight_name) const;
  // Its shape for a weight of N output rows and K input columns ([1] for a tensor scale; the
  // checkpoint may also write [] there and [N] for [N, 1]: scale_shape_matches accepts both).
  std::vector<int64_t> scale_shape(int64_t rows, int64_t cols) const;
  bool scale_shape_matches(const std::vector<int64_t>& shape, int64_t rows, int64_t cols) const;
  // How a rank holds a quantized weight's slice of `cols` input columns from column col0: one row
  // of `scale_groups` scales per output row, column 0 at `scale_phase` in its group of
  // `scale_group_width` (model/weight_staging.cpp loads so, model/shard_bytes.cpp counts so).
  int64_t scale_group_width(int64_t weight_cols) const {
    return granularity == ScaleGranularity::Block ? block_cols : weight_cols;
  }
  int64_t scale_phase(int64_t col0, int64_t weight_cols) const { return col0 % scale_group_width(weight_cols); }
  int64_t scale_groups(int64_t col0, int64_t cols, int64_t weight_cols) const {
    const int64_t g = scale_group_width(weight_cols);
    return (scale_phase(col0, weight_cols) + cols + g - 1) / g;
  }
  // "fp8: e4m3 values, scales block 128x128", "compressed-tensors: e4m3 values, scales per channel",
  // "awq: int4 values, zero points and scales per group of 128", "compressed-tensors: int8 values,
  // scales per channel, activations int8 per token"
  std::string describe() const;
};

// Parses config.json's quantization_config (q); errors name file and the key
// ("quantization_config.quant_method", ...).
QuantizationConfig parse_quantization_config(const nlohmann::json& q, const std::string& file);

}  // namespace tpbatch
