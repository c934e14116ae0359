// gemm_nt against a double-precision loop on the same (widened) weights: every weight type, every
// path, every kernel family this CPU can run (portable, AVX2, AVX-512, AVX512_BF16), shapes that
// are not multiples of the vector width, the register blocks or the thread split.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <tuple>
#include <stdexcept>
#include <vector>

#include "backend/cpu/gemm/gemm.h"
#include "backend/dtype.h"

namespace tpbatch::cpu {
namespace {

// Weights of one type, kept both as their stored bits and widened to double for the reference.
struct TypedWeights {
  DType dtype;
  std::vector<float> f32;
  std::vector<uint16_t> half;
  std::vector<double> wide;
  int64_t ld;
  const void* data() const { return dtype == DType::F32 ? static_cast<const void*>(f32.data()) : half.data(); }
};

TypedWeights make_weights(DType dtype, int64_t n, int64_t k, int64_t ld, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  TypedWeights w{dtype, {}, {}, std::vector<double>(size_t(n * ld), 0.0), ld};
  if (dtype == DType::F32) w.f32.assign(size_t(n * ld), 0.0f);
  else w.half.assign(size_t(n * ld), 0);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t kk = 0; kk < ld; ++kk) {
      // Padding beyond k holds NaN: a kernel that reads past the row end poisons its result.
      const float v = kk < k ? dist(rng) : NAN;
      const size_t at = size_t(j * ld + kk);
      switch (dtype) {
        case DType::F32: w.f32[at] = v; w.wide[at] = v; break;
        case DType::BF16: w.half[at] = f32_to_bf16(v); w.wide[at] = bf16_to_f32(w.half[at]); break;
        case DType::F16: w.half[at] = f32_to_f16(v); w.wide[at] = f16_to_f32(w.half[at]); break;
        default: break;
      }
    }
  return w;
}

// Whether gemm_nt computes these bf16 weights with vdpbf16ps or AMX tiles (the row-blocked and
// panel paths on AMX CPUs): the activations are split into three bf16 terms (fp32's precision,
// checked to the same tolerance as every path), and subnormal weights count as 0.
bool takes_bf16dp(DType dtype, GemmPath path, int64_t m, int64_t k) {
  if (dtype != DType::BF16 || gemm_isa() != GemmIsa::Amx) return false;
  if (path == GemmPath::Auto) path = gemm_auto_path(dtype, m, 1, k);
  // the broadcast kernel widens
  return path == GemmPath::RowBlocked || path == GemmPath::Panel;
}

// Runs gemm_nt on one shape (with strided x/w/y when `strided`) and checks every element
// against the double loop, tolerance relative to Σ|x·w| of that element.
void check_shape(DType dtype, int64_t m, int64_t n, int64_t k, GemmPath path, bool strided = false) {
  SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " m=" << m << " n=" << n << " k=" << k << " path="
                                    << gemm_path_name(path) << " isa=" << gemm_isa_name(gemm_isa())
                                    << (strided ? " strided" : ""));
  std::mt19937 rng(uint32_t(m * 7919 + n * 104729 + k * 31 + int(dtype)));
  const int64_t ldx = strided ? k + 3 : k, ldw = strided ? k + 5 : k, ldy = strided ? n + 2 : n;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(size_t(m * ldx), NAN);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) x[size_t(i * ldx + kk)] = dist(rng);
  const TypedWeights w = make_weights(dtype, n, k, ldw, rng);
  const float sentinel = -12345.0f;
  std::vector<float> y(size_t(m * ldy), sentinel);
  gemm_nt(x.data(), ldx, w.data(), ldw, dtype, y.data(), ldy, m, n, k, path);
  // The reference depends only on the (seeded) data: computed once per shape for all paths and ISAs.
  static std::map<std::tuple<int, int64_t, int64_t, int64_t, bool>, std::vector<double>> cache;
  std::vector<double>& refs = cache[{int(dtype), m, n, k, strided}];
  if (refs.empty()) {
    refs.resize(size_t(2 * m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0, mag = 0;
        for (int64_t kk = 0; kk < k; ++kk) {
          const double p = double(x[size_t(i * ldx + kk)]) * w.wide[size_t(j * ldw + kk)];
          ref += p;
          mag += std::fabs(p);
        }
        refs[size_t(2 * (i * n + j))] = ref;
        refs[size_t(2 * (i * n + j) + 1)] = mag;
      }
  }
  int bad = 0;
  for (int64_t i = 0; i < m && bad < 5; ++i) {
    for (int64_t j = 0; j < n && bad < 5; ++j) {
      const double ref = refs[size_t(2 * (i * n + j))], mag = refs[size_t(2 * (i * n + j) + 1)];
      const double got = y[size_t(i * ldy + j)];
      const double tol = 2e-6 * mag + 1e-30;
      if (!(std::fabs(got - ref) <= tol)) {
        ADD_FAILURE() << "y[" << i << "][" << j << "] = " << got << ", expected " << ref << " (tol " << tol << ")";
        ++bad;
      }
    }
    for (int64_t j = n; j < ldy; ++j)
      if (y[size_t(i * ldy + j)] != sentinel) {
        ADD_FAILURE() << "wrote past row end: y[" << i << "][" << j << "]";
        ++bad;
      }
  }
}

const DType kTypes[] = {DType::F32, DType::BF16, DType::F16};
const int64_t kRows[] = {1, 2, 3, 7, 8, 16, 17, 33, 64, 200};
const int64_t kCols[] = {1, 5, 100, 768};
const int64_t kDepths[] = {1, 7, 64, 768};

void check_all_shapes(GemmPath path) {
  for (DType dtype : kTypes)
    for (int64_t m : kRows)
      for (int64_t n : kCols)
        for (int64_t k : kDepths) check_shape(dtype, m, n, k, path);
}

class GemmIsaTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    if (GetParam() > gemm_isa()) GTEST_SKIP() << "this CPU cannot run " << gemm_isa_name(GetParam());
    set_gemm_isa_for_testing(GetParam());
  }
  void TearDown() override { reset_gemm_isa_for_testing(); }
};

TEST_P(GemmIsaTest, AutoPathMatchesDoubleReference) { check_all_shapes(GemmPath::Auto); }

// Each path on every shape, whatever Auto would pick: the crossover may move without losing cover.
TEST_P(GemmIsaTest, RowBlockedPathMatchesDoubleReference) { check_all_shapes(GemmPath::RowBlocked); }
TEST_P(GemmIsaTest, PanelPathMatchesDoubleReference) { check_all_shapes(GemmPath::Panel); }
TEST_P(GemmIsaTest, BroadcastPathMatchesDoubleReference) { check_all_shapes(GemmPath::Broadcast); }

TEST_P(GemmIsaTest, StridedOperands) {
  for (DType dtype : kTypes)
    for (int64_t m : {1, 5, 64})
      for (GemmPath path : {GemmPath::RowBlocked, GemmPath::Broadcast, GemmPath::Panel})
        check_shape(dtype, m, 37, 77, path, true);
  // The broadcast kernel's k slices (256) and 16-row blocks, with strides.
  for (DType dtype : kTypes)
    for (int64_t m : {9, 16, 33}) check_shape(dtype, m, 37, 601, GemmPath::Broadcast, true);
}

// Shapes of the 125M model, including a panel wider than one scratch panel (n = 4096).
TEST_P(GemmIsaTest, ModelShapes) {
  for (DType dtype : kTypes) {
    check_shape(dtype, 4, 4096, 768, GemmPath::Auto);
    check_shape(dtype, 40, 4096, 768, GemmPath::Panel);
    check_shape(dtype, 9, 768, 2048, GemmPath::RowBlocked);
    check_shape(dtype, 24, 2048, 768, GemmPath::Broadcast);
    check_shape(dtype, 40, 768, 2048, GemmPath::Broadcast);
  }
}

// Decode-sized batches: every M from 1 to 17 (all the row-group remainders of the register
// blocks), 31 and 64, against odd n (a 4-row and a 6-row weight block remainder) and odd k, one
// below the vector width multiple and one past the k slices (512 of the row-blocked kernel, 256
// of the broadcast kernel).
TEST_P(GemmIsaTest, DecodeBatchShapes) {
  std::vector<int64_t> rows;
  for (int64_t m = 1; m <= 17; ++m) rows.push_back(m);
  rows.push_back(31);
  rows.push_back(64);
  for (DType dtype : kTypes)
    for (int64_t m : rows)
      for (int64_t k : {int64_t(77), int64_t(1031)})
        for (GemmPath path : {GemmPath::Auto, GemmPath::RowBlocked, GemmPath::Broadcast})
          check_shape(dtype, m, 37, k, path);
}

// What the batch may and may not change in a row's result, as the kernels stand: an output
// depends only on its own row of x, its weight row and k, never on the other rows' values or on
// the row's place in the batch; within a kernel regime it does not depend on m either. Today's
// regimes (row-blocked path): m = 1 for 16-bit weights is the single-stream kernel; m <= 3 sums
// each row over the whole of k; m >= 4 sums k in slices of 512. So for k <= 512 every m from 2
// (1 for fp32) to 63 gives the same bits. The engine's batching tests (tokens equal across
// max_seqs, layouts) tolerate rounding differences between regimes; this pins what is exact.
// The broadcast path (AVX2) sums each output lane over k in order whatever m is: one regime for
// every m and k; so do the vdpbf16ps row kernel (AVX512_BF16, bf16 weights) and the AMX tiles. Auto takes row-blocked, broadcast or panel by m (gemm.cpp): its results are
// exact within each path's regimes (the panel path, OpenBLAS, is not checked here).
std::vector<std::vector<int64_t>> exact_regimes(GemmPath path, DType dtype, int64_t k) {
  const bool half = dtype != DType::F32;
  const bool portable = gemm_isa() == GemmIsa::Portable;
  if (path == GemmPath::Auto) {
    std::vector<std::vector<int64_t>> out;
    for (GemmPath p : {GemmPath::RowBlocked, GemmPath::Broadcast, GemmPath::Panel})
      for (const auto& regime : exact_regimes(p, dtype, k)) {
        std::vector<int64_t> taken;  // the m of this regime that Auto sends down path p
        for (int64_t m : regime)
          if (gemm_auto_path(dtype, m, 37, k) == p) taken.push_back(m);
        if (taken.size() >= 2) out.push_back(taken);
      }
    return out;
  }
  // AMX tiles sum each output over k in one order for every m; OpenBLAS's panel is not checked.
  if (path == GemmPath::Panel)
    return takes_bf16dp(dtype, path, 1, k) ? std::vector<std::vector<int64_t>>{{1, 2, 3, 4, 5, 16, 17, 31, 33, 63}}
                                           : std::vector<std::vector<int64_t>>{};
  if (path == GemmPath::Broadcast && !portable) return {{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 31, 33, 63}};
  // The vdpbf16ps row kernel sums each output over k in one order (lanes over k, one horizontal
  // sum at the end) for every m.
  if (path == GemmPath::RowBlocked && takes_bf16dp(dtype, path, 1, k)) return {{1, 2, 3, 4, 5, 6, 7, 16, 17, 31, 63}};
  if (portable || k <= 512) return {{half && !portable ? 2 : 1, 3, 4, 5, 6, 7, 16, 17, 31, 63}};
  return {{half ? 2 : 1, 2, 3}, {4, 5, 6, 7, 16, 17, 31, 63}};
}

TEST_P(GemmIsaTest, RowResultsDoNotDependOnTheOtherRows) {
  std::mt19937 rng(99);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int64_t n = 37, max_m = 63;
  for (GemmPath path : {GemmPath::RowBlocked, GemmPath::Broadcast, GemmPath::Panel, GemmPath::Auto})
  for (DType dtype : kTypes)
    for (int64_t k : {int64_t(300), int64_t(1031)}) {
      SCOPED_TRACE(gemm_path_name(path));
      std::vector<float> x(size_t(max_m * k));
      for (float& v : x) v = dist(rng);
      const TypedWeights w = make_weights(dtype, n, k, k, rng);
      auto run = [&](const std::vector<float>& xs, int64_t m) {
        std::vector<float> y(size_t(m * n));
        gemm_nt(xs.data(), k, w.data(), k, dtype, y.data(), n, m, n, k, path);
        return y;
      };
      // Regimes of m whose results must agree bit for bit, row by row.
      const std::vector<std::vector<int64_t>> regimes = exact_regimes(path, dtype, k);
      if (path == GemmPath::RowBlocked || path == GemmPath::Broadcast) EXPECT_FALSE(regimes.empty());
      for (const auto& regime : regimes) {
        const std::vector<float> ref = run(x, regime.back());
        for (int64_t m : regime) {
          const std::vector<float> y = run(x, m);
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < n; ++j)
              ASSERT_EQ(y[size_t(i * n + j)], ref[size_t(i * n + j)])
                  << dtype_name(dtype) << " k=" << k << " m=" << m << " vs m=" << regime.back() << " at [" << i
                  << "][" << j << "]";
        }
        // The same rows in reverse order: each row's result moves with it, unchanged.
        const int64_t m = regime.back();
        std::vector<float> rev(size_t(m * k));
        for (int64_t i = 0; i < m; ++i)
          std::copy(x.begin() + (m - 1 - i) * k, x.begin() + (m - i) * k, rev.begin() + i * k);
        const std::vector<float> y = run(rev, m);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j)
            ASSERT_EQ(y[size_t(i * n + j)], ref[size_t((m - 1 - i) * n + j)])
                << dtype_name(dtype) << " k=" << k << " reversed rows, row " << i;
      }
    }
}

// Identity rows of x pick each weight out exactly: every widening (bf16 shift, F16C, the
// portable fp16 arithmetic) must agree bit for bit with dtype.h's conversions on finite
// specials — subnormals, the largest and smallest normals, negative zero. The vdpbf16ps kernels
// (AVX512_BF16) do not widen: they read subnormal bf16 weights as zero, and every other value
// exactly.
TEST_P(GemmIsaTest, WideningIsExactOnSpecialValues) {
  const std::vector<uint16_t> f16 = {0x0001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x8000, 0x8001, 0x3c00, 0xbc00, 0x3555,
                                     0x0200, 0x83ff, 0x7800, 0x0000, 0x5640, 0xd640, 0x1234};
  const std::vector<uint16_t> bf16 = {0x0001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x8000, 0x8001, 0x3f80, 0xbf80, 0x3eab,
                                      0x0040, 0x807f, 0x7f00, 0x0000, 0x42c8, 0xc2c8, 0x1234};
  const int64_t k = int64_t(f16.size()), n = 3;  // every weight row holds all the values, rotated
  std::vector<float> x(size_t(k * k), 0.0f);
  for (int64_t i = 0; i < k; ++i) x[size_t(i * k + i)] = 1.0f;
  for (DType dtype : {DType::BF16, DType::F16}) {
    const std::vector<uint16_t>& vals = dtype == DType::BF16 ? bf16 : f16;
    std::vector<uint16_t> w(size_t(n * k));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t kk = 0; kk < k; ++kk) w[size_t(j * k + kk)] = vals[size_t((kk + j) % k)];
    for (GemmPath path : {GemmPath::RowBlocked, GemmPath::Broadcast, GemmPath::Panel})
      for (int64_t m : {int64_t(1), k}) {  // m = 1 takes the single-row kernel
        std::vector<float> y(size_t(m * n), -1.0f);
        gemm_nt(x.data(), k, w.data(), k, dtype, y.data(), n, m, n, k, path);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            const uint16_t bits = w[size_t(j * k + i)];
            float want = dtype == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
            if (takes_bf16dp(dtype, path, m, k) && std::fpclassify(want) == FP_SUBNORMAL) want = 0.0f;
            EXPECT_EQ(y[size_t(i * n + j)], want) << dtype_name(dtype) << " bits 0x" << std::hex << bits
                                                  << " path " << gemm_path_name(path);
          }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, GemmIsaTest,
                         ::testing::Values(GemmIsa::Amx, GemmIsa::Avx512Bf16, GemmIsa::Avx512, GemmIsa::Avx2Fma,
                                           GemmIsa::Portable),
                         [](const auto& info) {
                           switch (info.param) {
                             case GemmIsa::Amx: return std::string("Amx");
                             case GemmIsa::Avx512Bf16: return std::string("Avx512Bf16");
                             case GemmIsa::Avx512: return std::string("Avx512");
                             case GemmIsa::Avx2Fma: return std::string("Avx2Fma");
                             default: return std::string("Portable");
                           }
                         });

// The same result on 1 thread, on the team, and when called from inside a parallel region
// (where gemm_nt must not split: each caller thread computes its own call whole).
TEST(Gemm, ThreadCountDoesNotChangeResult) {
  std::mt19937 rng(7);
  const int64_t m = 5, n = 1000, k = 300;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(size_t(m * k));
  for (float& v : x) v = dist(rng);
  const TypedWeights w = make_weights(DType::BF16, n, k, k, rng);
  std::vector<float> one(size_t(m * n)), team(size_t(m * n));
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  gemm_nt(x.data(), w.data(), DType::BF16, one.data(), m, n, k);
  omp_set_num_threads(std::max(2, saved));
  gemm_nt(x.data(), w.data(), DType::BF16, team.data(), m, n, k);
  EXPECT_EQ(one, team);  // each output element is computed by one thread in the same order
  std::vector<std::vector<float>> inner(4, std::vector<float>(size_t(m * n)));
#pragma omp parallel for num_threads(2)
  for (int c = 0; c < 4; ++c) gemm_nt(x.data(), w.data(), DType::BF16, inner[size_t(c)].data(), m, n, k);
  for (const auto& r : inner) EXPECT_EQ(r, one);
  omp_set_num_threads(saved);
}

TEST(Gemm, ZeroDepthGivesZeros) {
  std::vector<float> y(6, 1.0f);
  const float x = 0;
  const uint16_t w = 0;
  gemm_nt(&x, &w, DType::BF16, y.data(), 2, 3, 0);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

TEST(Gemm, RejectsBadInput) {
  std::vector<float> buf(64);
  EXPECT_THROW(gemm_nt(buf.data(), buf.data(), DType::I32, buf.data(), 2, 2, 2), std::invalid_argument);
  EXPECT_THROW(gemm_nt(buf.data(), 1, buf.data(), 2, DType::F32, buf.data(), 2, 2, 2, 2), std::invalid_argument);
  EXPECT_THROW(gemm_nt(buf.data(), buf.data(), DType::F32, buf.data(), -1, 2, 2), std::invalid_argument);
}

}  // namespace
}  // namespace tpbatch::cpu
