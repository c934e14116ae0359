#pragma once
// make-model's 4-bit quantizer: a generated model's linear layers written as the public 4-bit
// formats write them (model/int4_checkpoint.h reads them and cites the tools), group size 128, or
// the dequantized fp32 twin of the same weights:
//   awq:   AutoAWQ GEMM, asymmetric: I32 X.qweight [K, N/8], I32 X.qzeros [K/128, N/8], F16
//          X.scales [K/128, N]; scale (max - min) / 15, zero -round(min / scale) in [0, 15];
//   gptq:  AutoGPTQ (checkpoint_format gptq, sym, desc_act false): I32 X.qweight [K/8, N], I32
//          X.qzeros [K/128, N/8] holding zero - 1 = 7, F16 X.scales [K/128, N], I32 X.g_idx [K];
//          scale 2 * amax / 15, zero 8;
//   w4a16: compressed-tensors pack-quantized, int 4-bit symmetric, strategy group (llm-compressor's
//          W4A16 scheme, lm_head ignored): I32 X.weight_packed [N, K/8] (value + 8), BF16
//          X.weight_scale [N, K/128], I64 X.weight_shape [2]; scale amax / 7.5, values in [-8, 7].
// Each weight is quantized with its scale as stored (F16 / BF16), so the loader's (q - zero) *
// scale is exactly the twin's value.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tpbatch {

enum class Int4Scheme : uint8_t { Awq, Gptq, W4A16 };

inline constexpr int64_t kInt4GroupSize = 128;

// "awq" | "gptq" | "w4a16" -> true and the scheme; anything else false.
bool parse_int4_scheme(const std::string& name, Int4Scheme& scheme);

// make-model's file: the header entries of a quantized [rows, cols] weight `name` ("X.weight";
// with `dequantize` one F32 tensor) at `offset`, which moves past them, and their bytes in the
// same order. Throws when cols is not a multiple of the group size or rows of 8.
void int4_header_entries(nlohmann::json& header, uint64_t& offset, Int4Scheme scheme, const std::string& name,
                         const std::vector<int64_t>& shape, bool dequantize);
std::vector<unsigned char> int4_file_bytes(Int4Scheme scheme, const std::string& name, const float* w, int64_t rows,
                                           int64_t cols, bool dequantize);
// config.json's quantization_config for the scheme.
nlohmann::ordered_json int4_quantization_config(Int4Scheme scheme);

}  // namespace tpbatch
