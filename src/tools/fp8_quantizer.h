#pragma once
// make-model's 8-bit quantizer (fp8, and int8 W8A8): a generated model's linear layers written as
// the public formats write them (model/quantization.h reads them), or the dequantized fp32 twin of
// the same weights.
//   fp8-block:   quant_method fp8, weight_block_size [128, 128]: F8_E4M3 `X.weight` and F32
//                `X.weight_scale_inv` [ceil(N/128), ceil(K/128)] (DeepSeek-V3 / Qwen3-FP8 layout);
//   fp8-channel: compressed-tensors float-quantized, strategy channel, dynamic per-token
//                activations: F8_E4M3 `X.weight` and BF16 `X.weight_scale` [N, 1] (llm-compressor's
//                FP8_DYNAMIC layout, lm_head ignored).
//   int8:        compressed-tensors int-quantized, strategy channel, symmetric, dynamic per-token
//                int8 activations: I8 `X.weight` and BF16 `X.weight_scale` [N, 1] (llm-compressor's
//                W8A8 layout, as RedHatAI's "*-quantized.w8a8" models; lm_head ignored).
// Scales are amax / 448 (e4m3's largest value) per block or row, as those tools compute them;
// int8 ones amax / 127 per row, values rounded to nearest even within [-127, 127].
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpbatch {

enum class Fp8Scheme : uint8_t { Block, Channel, Int8 };

// "fp8-block" | "fp8-channel" | "int8"; throws naming the option otherwise.
Fp8Scheme parse_fp8_scheme(const std::string& name);
// Whether make-model quantizes this tensor: the projections of attention and the MLPs (experts
// included); embeddings, lm_head, norms and MoE routers stay unquantized.
bool fp8_quantizes(const std::string& tensor_name);

struct Fp8Tensor {
  std::vector<uint8_t> values;       // [rows][cols] e4m3 (Int8: int8 bit patterns)
  std::vector<float> scales;         // the scale tensor's elements (what the loader multiplies by)
  std::vector<int64_t> scale_shape;
  std::string scale_name;            // X.weight_scale_inv | X.weight_scale
  const char* scale_dtype = "F32";   // safetensors spelling
};
Fp8Tensor quantize_fp8(Fp8Scheme scheme, const std::string& name, const float* w, int64_t rows, int64_t cols);
// value * scale, in fp32: exactly what the CPU GEMM computes from the quantized tensor.
std::vector<float> dequantize_fp8(Fp8Scheme scheme, const Fp8Tensor& q, int64_t rows, int64_t cols);
// The scale tensor's name, shape and dtype without computing it (the safetensors header).
Fp8Tensor fp8_layout(Fp8Scheme scheme, const std::string& name, int64_t rows, int64_t cols);
// make-model's file: the header entries of a quantized tensor (F8_E4M3 values, then the scale
// tensor right after them; with `dequantize` one F32 tensor) at `offset`, which moves past them,
// and their bytes in the same order.
void fp8_header_entries(nlohmann::json& header, uint64_t& offset, Fp8Scheme scheme, const std::string& name,
                        const std::vector<int64_t>& shape, bool dequantize);
std::vector<unsigned char> fp8_file_bytes(Fp8Scheme scheme, const std::string& name, const float* w, int64_t rows,
                                          int64_t cols, bool dequantize);
// config.json's quantization_config for the scheme.
nlohmann::ordered_json fp8_quantization_config(Fp8Scheme scheme);

}  // namespace tpbatch
