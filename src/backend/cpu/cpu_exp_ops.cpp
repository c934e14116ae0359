// silu_mul and sum_exp_shifted (cpu_exp_ops.h): the portable versions, with vector_exp.h's scalar
// twin of the exp, and the dispatch to the AVX2 + FMA ones of cpu_exp_ops_avx2.cpp (a file of its
// own: vector_exp.h's functions take the target of the file that includes them).
#include "backend/cpu/cpu_exp_ops.h"

#include <omp.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backend/cpu/cpu_has_avx2_fma.h"
#include "backend/cpu/vector_exp.h"

namespace tpbatch::cpu {
namespace {

// Below this many elements the OpenMP team is not woken (its start costs more than the work).
constexpr int64_t kParallelMin = 1 << 15;

inline float silu_times(float g, float u) { return g / (1.0f + vexp::exp_scalar(-g)) * u; }

}  // namespace

namespace detail {
void silu_mul_portable(const float* g, const float* u, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = silu_times(g[i], u[i]);
}

double sum_exp_portable(const float* x, int64_t n, float shift) {
  double s = 0.0;
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    nan |= std::isnan(x[j]);
    s += vexp::exp_scalar(x[j] - shift);
  }
  return nan ? std::numeric_limits<double>::quiet_NaN() : s;
}

float exp_in_place_portable(float* x, int64_t n, float shift) {
  float s = 0.0f;
  for (int64_t j = 0; j < n; ++j) s += (x[j] = vexp::exp_scalar(x[j] - shift));
  return s;
}
}  // namespace detail
}  // namespace tpbatch::cpu

#if defined(__x86_64__)
#define TPBATCH_EXP_OPS_HAVE_AVX2 1
namespace tpbatch::cpu::detail {
// cpu_exp_ops_avx2.cpp
void silu_mul_avx2(const float* g, const float* u, float* o, int64_t n);
double sum_exp_avx2(const float* x, int64_t n, float shift);
float exp_in_place_avx2(float* x, int64_t n, float shift);
}  // namespace tpbatch::cpu::detail
#endif

namespace tpbatch::cpu {
namespace {

bool cpu_has_avx2() {
#if defined(TPBATCH_EXP_OPS_HAVE_AVX2)
  return cpu_has_avx2_fma();
#else
  return false;
#endif
}

std::atomic<bool>& vectorised() {
  static std::atomic<bool> on{cpu_has_avx2()};
  return on;
}

void silu_row_range(const float* gu, float* out, int64_t inter, int64_t r, bool vec) {
  const float* g = gu + r * 2 * inter;
#if defined(TPBATCH_EXP_OPS_HAVE_AVX2)
  if (vec) return detail::silu_mul_avx2(g, g + inter, out + r * inter, inter);
#endif
  (void)vec;
  detail::silu_mul_portable(g, g + inter, out + r * inter, inter);
}

}  // namespace

bool exp_ops_vectorised() { return vectorised().load(std::memory_order_relaxed); }
void set_exp_ops_vectorised_for_testing(bool on) { vectorised().store(on && cpu_has_avx2()); }

void silu_mul(const float* gu, float* out, int64_t m, int64_t inter) {
  const bool vec = exp_ops_vectorised();
  if (m > 1 && m * inter >= kParallelMin && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < m; ++r) silu_row_range(gu, out, inter, r, vec);
    return;
  }
  for (int64_t r = 0; r < m; ++r) silu_row_range(gu, out, inter, r, vec);
}

double sum_exp_shifted(const float* x, int64_t n, float shift) {
#if defined(TPBATCH_EXP_OPS_HAVE_AVX2)
  if (exp_ops_vectorised()) return detail::sum_exp_avx2(x, n, shift);
#endif
  return detail::sum_exp_portable(x, n, shift);
}

float exp_shifted_in_place(float* x, int64_t n, float shift) {
#if defined(TPBATCH_EXP_OPS_HAVE_AVX2)
  if (exp_ops_vectorised()) return detail::exp_in_place_avx2(x, n, shift);
#endif
  return detail::exp_in_place_portable(x, n, shift);
}

}  // namespace tpbatch::cpu
