#include "backend/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tpbatch {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::F8E4M3: return "F8_E4M3";
    case DType::I64: return "I64";
    case DType::I4: return "I4";
    case DType::I8: return "I8";
  }
  return "?";
}

float bf16_to_f32(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

// IEEE half -> float (subnormals, inf, NaN); integer and exact float ops only.
float f16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h & 0x7fffu) << 13;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 0x1.0p112f;  // rebias the exponent (15 -> 127); subnormals come out right too
  uint32_t o;
  std::memcpy(&o, &f, 4);
  if (f >= 65536.0f) o |= 255u << 23;  // was inf / NaN
  o |= uint32_t(h & 0x8000u) << 16;
  std::memcpy(&f, &o, 4);
  return f;
}

// float -> IEEE half, round to nearest even, overflow to inf, subnormals kept.
uint16_t f32_to_f16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {  // below the smallest normal half (2^-14): subnormal or zero
    float f;
    std::memcpy(&f, &a, 4);
    f = f * 0x1.0p24f;  // in units of 2^-24, the half subnormal step
    const uint32_t q = static_cast<uint32_t>(f);
    const float rem = f - static_cast<float>(q);
    uint32_t r = q + ((rem > 0.5f || (rem == 0.5f && (q & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t m = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);  // rebias and round the 13 dropped bits
  return static_cast<uint16_t>(sign | (m >> 13));
}

// The exponent and mantissa bits moved to fp32's places, then rebiased by a multiply (7 -> 127):
// exact, and right for subnormals too (the same trick as f16_to_f32).
float f8e4m3_to_f32(uint8_t b) {
  if ((b & 0x7fu) == 0x7fu) return std::numeric_limits<float>::quiet_NaN();
  uint32_t bits = uint32_t(b & 0x7fu) << 20;
  float f;
  std::memcpy(&f, &bits, 4);
  f *= 0x1.0p120f;
  return (b & 0x80u) ? -f : f;
}

uint8_t f32_to_f8e4m3(float value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  float a = std::fabs(value);
  if (a >= 448.0f) return sign | 0x7e;  // saturate (0x7e = 448)
  // Round to the nearest multiple of the fp8 step at a's binade (2^-9 below the normal range,
  // 2^(e-3) above it) with ties to even, then re-encode; nearbyint rounds ties to even.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const int step_exp = std::max(e - 1, -6) - 3;
  const float q = std::nearbyint(std::ldexp(a, -step_exp));  // multiples of the step
  const float r = std::ldexp(q, step_exp);
  // r is exactly representable now; encode by searching the 127 non-negative codes' values would
  // be slow, so compute the fields: exponent from r's binade, mantissa from the remainder.
  if (r == 0.0f) return sign;
  int re;
  const float rm = std::frexp(r, &re);  // r = rm * 2^re, rm in [0.5, 1)
  if (re - 1 < -6) return sign | uint8_t(std::lround(std::ldexp(r, 9)));  // subnormal: r / 2^-9
  const int exp_field = re - 1 + 7;
  const int mant = int(std::lround((rm * 2.0f - 1.0f) * 8.0f));
  return sign | uint8_t(exp_field << 3) | uint8_t(mant);
}

}  // namespace tpbatch
