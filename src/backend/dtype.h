#pragma once
// Element types of backend memory and of checkpoint tensors. Weights keep their storage type
// (F32, BF16, F16); activations, logits and the KV cache are whatever the backend computes in.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tpbatch {

enum class DType : uint8_t { F32, F16, BF16, I32 };

inline size_t dtype_size(DType dtype) { return dtype == DType::F16 || dtype == DType::BF16 ? 2 : 4; }
const char* dtype_name(DType dtype);  // "F32", "F16", "BF16", "I32" (safetensors spelling)

// bf16/fp16 <-> fp32, one element; to-16-bit rounds to nearest even (NaN stays NaN).
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

}  // namespace tpbatch
