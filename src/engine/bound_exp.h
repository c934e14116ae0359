#pragma once
// 2^x in float for the sampler's error bounds (sampler_fast.h), never for a probability it returns:
// x = n + f with n = round(x) (the 1.5 * 2^23 trick) and |f| <= 1/2, 2^f by a degree-4 polynomial
// (a relative-error fit on [-1/2, 1/2]), 2^n written into the exponent. One template for a float
// and for GCC's vectors of floats (the same operations lane by lane; multiplies and adds never
// fused: the engine is built with -ffp-contract=off), so every width computes the same values.
// The argument is at most 0 in use.
//
// Internal linkage on purpose: logit_scan_avx2.cpp and logit_scan_avx512.cpp include this after
// raising their ISA; shared inline functions would let the linker hand their copy to every caller.
#include <cstdint>
#include <type_traits>

namespace tpbatch {

inline constexpr float kBoundExp2Floor = -115.0f;  // below it, -inf and NaN included: 0
// |bound_exp2(x) - 2^x| <= kBoundExp2RelError * 2^x for x in [kBoundExp2Floor, 0] (checked over a
// dense grid by tests/unit/test_bound_exp.cpp); below the floor the error is 2^x, under 2.5e-35.
inline constexpr double kBoundExp2RelError = 5e-6;

namespace {

// The integer vector (or int32) of the same lanes as F.
template <class F>
struct IntLanesOf {
  typedef int32_t type __attribute__((vector_size(sizeof(F))));
};
template <>
struct IntLanesOf<float> {
  using type = int32_t;
};
template <class F>
using IntLanes = typename IntLanesOf<F>::type;

template <class F>
inline F bound_exp2(F x) {
  using I = IntLanes<F>;
  const auto keep = x >= kBoundExp2Floor;  // false for NaN
  x = keep ? x : F{} + 0.0f;
  const F n = (x + 12582912.0f) - 12582912.0f;
  const F f = x - n;
  F q = F{} + 9.570025569436189e-3f;
  q = q * f + 5.5917639113381414e-2f;
  q = q * f + 2.4024744581017127e-1f;
  q = q * f + 6.931218426878101e-1f;
  q = q * f + 9.999992622406815e-1f;
  I ni;
  if constexpr (std::is_same_v<F, float>) {
    ni = static_cast<int32_t>(n);
  } else {
    ni = __builtin_convertvector(n, I);
  }
  const F two_n = __builtin_bit_cast(F, static_cast<I>((ni + 127) << 23));
  return keep ? q * two_n : F{} + 0.0f;
}

}  // namespace
}  // namespace tpbatch
