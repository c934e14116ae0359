// One-sequence decode GEMV (m = 1) on the 125M model's MLP up shape (3072 x 768) for bf16, fp8
// (128-column scale groups), int8 W8A8 (a scale per row; x quantized per call) and 4-bit (awq-like
// groups of 128 with zero points) weights: microseconds per call, the weight bytes streamed per
// second, and the speed-ups over bf16 that the bytes per weight allow (2 / (1 + 4/128) = 1.94x for
// fp8, 2 / (1 + 4/768) = 1.99x for int8, 2 / (0.5 + 8/128) = 3.56x for 4-bit). 64 distinct
// copies of the weights are cycled so every call streams from memory, not cache; the kinds take
// turns over 7 passes and the best pass of each counts.
// --hot 1: the same copy every call (cache-resident), so each kernel's arithmetic rate shows; the
// gap to the default (streamed) run is the part of the stream the kernel fails to overlap.
// --isa NAME: a kernel family below the detected one (names as in tpbatch_gemm_bench).
// Usage: tpbatch_quantized_gemv_bench [--threads N] [--hot 0|1] [--isa NAME]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cpu/gemm/gemm.h"
#include "isa_option.h"

namespace {

bool g_hot = false;

using tpbatch::DType;
using namespace tpbatch::cpu;

constexpr int64_t kN = 3072, kK = 768, kCopies = 64, kGroup = 128, kGroups = kK / kGroup;

// Microseconds per call of one pass over the copies.
template <typename Call>
double us_per_call(Call&& call) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < kCopies; ++c) call(g_hot ? 0 : c);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / kCopies * 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--threads") == 0) threads = std::stoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--hot") == 0) g_hot = std::stoi(argv[i + 1]) != 0;
    else if (std::strcmp(argv[i], "--isa") == 0 && !force_isa(argv[i + 1])) return 2;
  omp_set_num_threads(threads);
  const int64_t nk = kN * kK, ng = kN * kGroups;
  std::vector<float> x(static_cast<size_t>(kK), 0.5f), y(static_cast<size_t>(kN));
  std::vector<uint16_t> bf16(size_t(nk * kCopies), 0x3c00);          // 1/128
  std::vector<uint8_t> fp8(size_t(nk * kCopies), 0x38), int4(size_t(nk / 2 * kCopies), 0x35);
  std::vector<float> scales(size_t(ng * kCopies), 0.01f), zeros(size_t(ng * kCopies), 8.0f);
  std::vector<int8_t> int8(size_t(nk * kCopies), 3);
  // The three kinds take turns, 7 passes, best of each: on shared cores a burst of others' work
  // then hits every kind alike.
  double bf = 1e30, f8 = 1e30, i8 = 1e30, i4 = 1e30;
  for (int pass = 0; pass < 7; ++pass) {
    bf = std::min(bf, us_per_call([&](int64_t c) {
      gemm_nt(x.data(), bf16.data() + c * nk, DType::BF16, y.data(), 1, kN, kK);
    }));
    f8 = std::min(f8, us_per_call([&](int64_t c) {
      gemm_nt_scaled(x.data(), fp8.data() + c * nk, GemmScales{scales.data() + c * ng, kGroups, kGroup, 0}, y.data(),
                     1, kN, kK);
    }));
    i8 = std::min(i8, us_per_call([&](int64_t c) {
      gemm_nt_int8(x.data(), int8.data() + c * nk, scales.data() + c * kN, y.data(), 1, kN, kK);
    }));
    i4 = std::min(i4, us_per_call([&](int64_t c) {
      gemm_nt_int4(x.data(), int4.data() + c * nk / 2,
                   GemmScales{scales.data() + c * ng, kGroups, kGroup, 0, zeros.data() + c * ng}, y.data(), 1, kN, kK);
    }));
  }
  const double kw = double(nk) / 1e3;  // thousands of weights: kw * bytes-per-weight / us = GB/s
  std::printf("threads %d, kernels %s, %lld x %lld, m = 1, weights %s\n", threads, gemm_isa_name(gemm_isa()),
              static_cast<long long>(kN), static_cast<long long>(kK), g_hot ? "hot (one copy, in cache)" : "streamed");
  std::printf("bf16  %7.1f us/call  %5.1f GB/s\n", bf, 2 * kw / bf);
  std::printf("fp8   %7.1f us/call  %5.1f GB/s  %.2fx bf16 (bytes allow %.2fx)\n", f8,
              kw * (1 + 4.0 / kGroup) / f8, bf / f8, 2.0 / (1 + 4.0 / kGroup));
  std::printf("int8  %7.1f us/call  %5.1f GB/s  %.2fx bf16 (bytes allow %.2fx), kernel %s\n", i8,
              kw * (1 + 4.0 / kK) / i8, bf / i8, 2.0 / (1 + 4.0 / kK), gemm_int8_kernel());
  std::printf("int4  %7.1f us/call  %5.1f GB/s  %.2fx bf16 (bytes allow %.2fx), %.2fx fp8\n", i4,
              kw * (0.5 + 8.0 / kGroup) / i4, bf / i4, 2.0 / (0.5 + 8.0 / kGroup), f8 / i4);
  return 0;
}
