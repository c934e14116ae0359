#pragma once
// 2^x in float for the sampler's error bounds (sampler_fast.h), never for a probability it returns:
// x = n + f with n = round(x) (the 1.5 * 2^23 trick) and |f| <= 1/2, 2^f by a degree-4 polynomial
// (a relative-error fit on [-1/2, 1/2]), 2^n written into the exponent. One template for a float
// and for GCC's vector of four (the same operations lane by lane, plain multiplies and adds), so the
// vector loops compute exactly what the scalar tests check. The argument is at most 0 in use.
#include <bit>
#include <cstdint>

namespace tpbatch {

inline constexpr float kBoundExp2Floor = -115.0f;  // below it, -inf and NaN included: 0
// |bound_exp2(x) - 2^x| <= kBoundExp2RelError * 2^x for x in [kBoundExp2Floor, 0] (checked over a
// dense grid by tests/unit/test_bound_exp.cpp); below the floor the error is 2^x, under 2.5e-35.
inline constexpr double kBoundExp2RelError = 5e-6;

using f32x4 = float __attribute__((vector_size(16)));
using i32x4 = int32_t __attribute__((vector_size(16)));

inline int32_t to_int(float x) { return static_cast<int32_t>(x); }
inline i32x4 to_int(f32x4 x) { return __builtin_convertvector(x, i32x4); }

template <class F>
inline F bound_exp2(F x) {
  using I = decltype(to_int(x));
  const auto keep = x >= kBoundExp2Floor;  // false for NaN
  x = keep ? x : F{} + 0.0f;
  const F n = (x + 12582912.0f) - 12582912.0f;
  const F f = x - n;
  F q = F{} + 9.570025569436189e-3f;
  q = q * f + 5.5917639113381414e-2f;
  q = q * f + 2.4024744581017127e-1f;
  q = q * f + 6.931218426878101e-1f;
  q = q * f + 9.999992622406815e-1f;
  const F two_n = std::bit_cast<F>(static_cast<I>((to_int(n) + 127) << 23));
  return keep ? q * two_n : F{} + 0.0f;
}

}  // namespace tpbatch
