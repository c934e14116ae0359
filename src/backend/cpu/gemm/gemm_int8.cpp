// W8A8 GEMM (gemm.h's gemm_nt_int8): x quantized to int8 per row, once per call, then int32 dot
// products against the int8 weights on the OpenMP team, each output scaled back to fp32. The
// AVX512-VNNI kernel is in gemm_int8_vnni.cpp, the AVX2 one in gemm_int8_avx2.cpp; this file has
// the portable one, which both must equal exactly (integer sums do not depend on their order).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/gemm/gemm.h"
#include "backend/cpu/gemm/gemm_kernels.h"

namespace tpbatch::cpu {
namespace {

// The largest k whose sums of q * w (|q| <= 127, |w| <= 128) stay inside int32.
constexpr int64_t kMaxInt8Depth = 131072;

// max |x[c]|, or +inf when x holds a NaN or an infinity.
float row_amax(const float* x, int64_t k) {
  float amax = 0.0f;
  bool finite = true;
  for (int64_t c = 0; c < k; ++c) {
    finite = finite && std::isfinite(x[c]);
    amax = std::max(amax, std::fabs(x[c]));
  }
  return finite ? amax : std::numeric_limits<float>::infinity();
}

// Row i of x as int8 with its scale and the sum of its values, given the row's amax (row_amax of
// the whole row: see gemm.h for the rule).
void quantize_row(const float* x, int64_t k, float amax, int8_t* q, float& scale, int32_t& sum) {
  sum = 0;
  if (!std::isfinite(amax) || amax == 0.0f) {
    std::fill(q, q + k, int8_t{0});
    scale = amax == 0.0f ? 0.0f : std::numeric_limits<float>::quiet_NaN();
    return;
  }
  scale = amax / 127.0f;
  for (int64_t c = 0; c < k; ++c) {
    const float r = std::clamp(std::nearbyint(x[c] / scale), -127.0f, 127.0f);
    q[c] = int8_t(r);
    sum += int32_t(q[c]);
  }
}

enum class Int8Kernel { Portable, Avx2, Vnni };

Int8Kernel int8_kernel() {
#if defined(TPBATCH_GEMM_HAVE_AVX512)
  __builtin_cpu_init();
  if (gemm_isa() >= GemmIsa::Avx512 && __builtin_cpu_supports("avx512vnni")) return Int8Kernel::Vnni;
#endif
#if defined(TPBATCH_GEMM_HAVE_AVX2)
  if (gemm_isa() >= GemmIsa::Avx2Fma) return Int8Kernel::Avx2;
#endif
  return Int8Kernel::Portable;
}

}  // namespace

namespace detail {

void int8_rows_portable(const Int8Args& a, int64_t n0, int64_t n1) {
  for (int64_t j = n0; j < n1; ++j) {
    const int8_t* w = a.w + j * a.k;
    for (int64_t i = 0; i < a.m; ++i) {
      const int8_t* q = a.xq + i * a.k;
      int32_t acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t c = 0; c < a.k; ++c) acc += int32_t(q[c]) * int32_t(w[c]);
      a.y[i * a.ldy + j] = float(acc) * a.xscale[i] * a.wscale[j];
    }
  }
}

}  // namespace detail

const char* gemm_int8_kernel() {
  switch (int8_kernel()) {
    case Int8Kernel::Vnni: return "avx512-vnni";
    case Int8Kernel::Avx2: return "avx2";
    case Int8Kernel::Portable: return "portable";
  }
  return "?";
}

void int8_row_amax(const float* x, int64_t m, int64_t k, float* amax) {
  for (int64_t i = 0; i < m; ++i) amax[i] = row_amax(x + i * k, k);
}

void gemm_nt_int8(const float* x, const int8_t* w, const float* scales, float* y, int64_t m, int64_t n, int64_t k,
                  const float* input_amax) {
  if (m < 0 || n < 0 || k < 0 || k > kMaxInt8Depth)
    throw std::invalid_argument("gemm_nt_int8: sizes m=" + std::to_string(m) + " n=" + std::to_string(n) +
                                " k=" + std::to_string(k) + " (k must be 0.." + std::to_string(kMaxInt8Depth) + ")");
  if (m == 0 || n == 0) return;
  thread_local std::vector<int8_t> xq;
  thread_local std::vector<float> xscale;
  thread_local std::vector<int32_t> xsum;
  xq.resize(size_t(m * k));
  xscale.resize(size_t(m));
  xsum.resize(size_t(m));
  for (int64_t i = 0; i < m; ++i)
    quantize_row(x + i * k, k, input_amax ? input_amax[i] : row_amax(x + i * k, k), xq.data() + i * k,
                 xscale[size_t(i)], xsum[size_t(i)]);
  const detail::Int8Args a{xq.data(), xscale.data(), xsum.data(), w, scales, y, n, m, n, k};
  const Int8Kernel kernel = int8_kernel();
  // As gemm_nt splits n: units of 16 rows, one thread for problems too small to wake the team.
  constexpr int64_t kUnit = 16;
  const int64_t units = (n + kUnit - 1) / kUnit;
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (2.0 * double(m) * double(n) * double(k) < 2.0e5) threads = 1;
  threads = int(std::min<int64_t>(threads, units));
  auto run_slice = [&](int t, int nt) {
    const int64_t n0 = std::min(n, units * t / nt * kUnit), n1 = std::min(n, units * (t + 1) / nt * kUnit);
#if defined(TPBATCH_GEMM_HAVE_AVX512)
    if (kernel == Int8Kernel::Vnni) return detail::int8_rows_vnni(a, n0, n1);
#endif
#if defined(TPBATCH_GEMM_HAVE_AVX2)
    if (kernel == Int8Kernel::Avx2) return detail::int8_rows_avx2(a, n0, n1);
#endif
    detail::int8_rows_portable(a, n0, n1);
  };
  if (threads <= 1) return run_slice(0, 1);
#pragma omp parallel num_threads(threads)
  run_slice(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace tpbatch::cpu
