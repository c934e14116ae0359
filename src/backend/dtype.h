#pragma once
// Element types of backend memory and of checkpoint tensors. Weights keep their storage type
// (F32, BF16, F16, or F8_E4M3 / I8 / I4 with scales: model/quantization.h); activations, logits and the KV
// cache are whatever the backend computes in.
#include <cstddef>
#include <cstdint>
#include <string>

namespace tpbatch {

// I64: checkpoint metadata only (compressed-tensors' weight_shape). I8: a linear layer's signed
// 8-bit integer weights (compressed-tensors W8A8), one a byte, as the checkpoint stores them. I4: a linear layer's 4-bit
// integer weights as the loader keeps them, two per byte (low nibble first); one "element" is a
// byte of two values, so a row of k values is (k + 1) / 2 elements. A checkpoint holds them packed
// in I32 words (model/int4_checkpoint.h) and the store lists the logical weight as I4.
enum class DType : uint8_t { F32, F16, BF16, I32, F8E4M3, I64, I4, I8 };

inline size_t dtype_size(DType dtype) {
  return dtype == DType::F8E4M3 || dtype == DType::I4 || dtype == DType::I8 ? 1
         : dtype == DType::F16 || dtype == DType::BF16 ? 2
         : dtype == DType::I64                         ? 8
                                                       : 4;
}
const char* dtype_name(DType dtype);  // "F32", "F16", "BF16", "I32", "F8_E4M3", "I64", "I4", "I8" (safetensors spelling)

// bf16/fp16 <-> fp32, one element; to-16-bit rounds to nearest even (NaN stays NaN).
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);
// OCP float8 e4m3fn (torch.float8_e4m3fn: no infinities, 0x7f / 0xff are NaN, largest 448) <->
// fp32; to-fp8 rounds to nearest even and saturates at ±448, as quantizers clamp before casting.
float f8e4m3_to_f32(uint8_t bits);
uint8_t f32_to_f8e4m3(float value);

}  // namespace tpbatch
