// gemm_nt: path choice (row-blocked, broadcast or panel sgemm), the thread split over n, the ISA
// dispatch.
// The kernels themselves are in gemm_avx2.cpp and gemm_portable.cpp.
#include "backend/cpu/gemm/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/cpu/gemm/gemm_kernels.h"

namespace tpbatch::cpu {
namespace {

using detail::GemmArgs;

void run_gemm(const GemmArgs& a, GemmPath path);

GemmIsa detected_isa() {
#if defined(TPBATCH_GEMM_HAVE_AVX2)
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")))
    return GemmIsa::Portable;
#if defined(TPBATCH_GEMM_HAVE_AVX512)
  // libgcc's cpu model also checks that the OS saves the zmm and mask registers (XCR0).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
  {
    if (!__builtin_cpu_supports("avx512bf16")) return GemmIsa::Avx512;
#if defined(TPBATCH_GEMM_HAVE_AMX)
    if (detail::amx_bf16_usable()) return GemmIsa::Amx;
#endif
    return GemmIsa::Avx512Bf16;
  }
#endif
  return GemmIsa::Avx2Fma;
#else
  return GemmIsa::Portable;
#endif
}

// -1: no override (use the detected ISA); else a GemmIsa forced by a test.
std::atomic<int> g_isa_override{-1};

GemmIsa current_isa() {
  static const GemmIsa detected = detected_isa();
  const int forced = g_isa_override.load(std::memory_order_relaxed);
  return forced < 0 ? detected : static_cast<GemmIsa>(forced);
}

// Whether the vdpbf16ps row kernel takes these weights (m below broadcast_min_rows): only beside
// AMX, on the Sapphire-Rapids-class Xeon where it was measured faster than widening. On a Zen 4
// (AVX512_BF16, no AMX) it streams bf16 weights at half the widening kernel's rate (tables below).
bool bf16dp(GemmIsa isa, DType wtype) { return isa == GemmIsa::Amx && wtype == DType::BF16; }
// Whether the panel path runs these weights on AMX tiles.
bool amx(GemmIsa isa, DType wtype) { return isa == GemmIsa::Amx && wtype == DType::BF16; }

void rows_kernel(GemmIsa isa, const GemmArgs& a, int64_t n0, int64_t n1) {
#if defined(TPBATCH_GEMM_HAVE_AVX512)
  if (bf16dp(isa, a.wtype)) return detail::rows_bf16dp(a, n0, n1);
#endif
#if defined(TPBATCH_GEMM_HAVE_AVX2)
  if (isa >= GemmIsa::Avx2Fma) return detail::rows_avx2(a, n0, n1);
#endif
  (void)isa;
  detail::rows_portable(a, n0, n1);
}

void broadcast_kernel(GemmIsa isa, const GemmArgs& a, int64_t n0, int64_t n1) {
#if defined(TPBATCH_GEMM_HAVE_AVX512)
  if (isa >= GemmIsa::Avx512) return detail::broadcast_avx512(a, n0, n1);
#endif
#if defined(TPBATCH_GEMM_HAVE_AVX2)
  if (isa >= GemmIsa::Avx2Fma) return detail::broadcast_avx2(a, n0, n1);
#endif
  detail::rows_portable(a, n0, n1);  // no portable broadcast kernel: the row-blocked one
}

void widen_kernel(GemmIsa isa, const GemmArgs& a, int64_t r0, int64_t rows, float* out) {
#if defined(TPBATCH_GEMM_HAVE_AVX2)
  if (isa >= GemmIsa::Avx2Fma) return detail::widen_avx2(a, r0, rows, out);
#endif
  (void)isa;
  detail::widen_portable(a, r0, rows, out);
}

// Panel path on weight rows [n0, n1): OpenBLAS sgemm (single-threaded; we are inside one of
// OpenMP's threads) straight on fp32 weights, or on panels of 16-bit or quantized weights widened
// into a thread-local scratch of panel_rows(k) rows.
// The rows of a panel: L2-sized (kPanelBytes), so sgemm packs it from L2, but at least 256 rows
// (up to 4 MiB) where that would be under 128: sgemm packs all of x (m x k floats) again on every
// call, and at k = 3072 an L2-sized panel is 32 rows, which left the MLP down projection of a
// 512-token prefill at 0.69 (4-bit) and 0.75 (bf16) of the fp32 weights' rate; 256 rows: 0.94
// (Zen 3, 1 thread; 0.78 -> 0.95 at 2 threads, 0.81 -> 1.0 at 128 tokens). At k = 768 the
// L2-sized panel is 128 rows and stays: 256 rows there measured the same.
constexpr int64_t kPanelBytes = 384 << 10, kPanelRows = 256, kPanelMaxBytes = 4 << 20;
int64_t panel_rows(int64_t k) {
  const int64_t l2 = (kPanelBytes / (4 * k)) / 16 * 16;
  if (l2 >= 128) return l2;
  return std::max<int64_t>(16, std::min(kPanelRows, kPanelMaxBytes / (4 * k)) / 16 * 16);
}

void panel_sgemm(GemmIsa isa, const GemmArgs& a, int64_t n0, int64_t n1) {
  if (n1 <= n0) return;
#if defined(TPBATCH_GEMM_HAVE_AMX)
  if (amx(isa, a.wtype)) return detail::bf16_amx(a, n0, n1);
#endif
  if (a.wtype == DType::F32) {
    const float* w = static_cast<const float*>(a.w) + n0 * a.ldw;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(a.m), int(n1 - n0), int(a.k), 1.0f, a.x, int(a.ldx), w,
                int(a.ldw), 0.0f, a.y + n0, int(a.ldy));
    return;
  }
  const int64_t nc = panel_rows(a.k);
  thread_local std::vector<float> panel;
  panel.resize(size_t(nc * a.k));
  for (int64_t j = n0; j < n1; j += nc) {
    const int64_t rows = std::min(nc, n1 - j);
    widen_kernel(isa, a, j, rows, panel.data());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(a.m), int(rows), int(a.k), 1.0f, a.x, int(a.ldx),
                panel.data(), int(a.k), 0.0f, a.y + j, int(a.ldy));
  }
}

// Quantized weights (F8E4M3 with scales, I4 with scales and zeros): a slice of rows at a time is
// dequantized into a thread-local fp32 scratch (the panel's size on the panel path, 16 rows --
// L1/L2-resident -- on the row-blocked one; the broadcast kernels dequantize their own 12 rows at
// a time) and computed by the fp32 kernel of the path, so the weights stream from memory at one byte each
// and every result equals the same weights dequantized ahead and run in fp32 (on the panel path,
// up to sgemm blocking the panels otherwise than one call over all the rows: fp32 noise).
// A single row of x (one sequence decoding) skips the scratch: its kernels read the quantized
// weights directly, the AVX-512 4-bit one to the same result, the AVX2 ones to fp32 noise (they
// apply each scale once per group).
void scaled_slices(GemmIsa isa, const GemmArgs& a, int64_t n0, int64_t n1, GemmPath path) {
#if defined(TPBATCH_GEMM_HAVE_AVX2)
#if defined(TPBATCH_GEMM_HAVE_AVX512)
  if (isa >= GemmIsa::Avx512 && a.wtype == DType::I4 && path == GemmPath::RowBlocked &&
      detail::int4_rows_m1_avx512(a, n0, n1))
    return;
#endif
  if (isa >= GemmIsa::Avx2Fma && path == GemmPath::RowBlocked && detail::quant_rows_m1_avx2(a, n0, n1)) return;
  // The broadcast kernels dequantize their own blocks of rows, so x^T (m x k floats) is packed
  // once a call: packed once a slice it cost as much as the FMAs (4-bit, 16 rows of x on a Zen 4:
  // 112 ms a step against bf16's 60).
  if (isa >= GemmIsa::Avx2Fma && path == GemmPath::Broadcast) return broadcast_kernel(isa, a, n0, n1);
#endif
  const int64_t slice = path == GemmPath::Panel ? panel_rows(a.k) : 16;
  thread_local std::vector<float> wide;
  wide.resize(size_t(slice * a.k));
  for (int64_t j = n0; j < n1; j += slice) {
    const int64_t rows = std::min(slice, n1 - j);
    widen_kernel(isa, a, j, rows, wide.data());
    GemmArgs f = a;
    f.w = wide.data();
    f.ldw = a.k;
    f.wtype = DType::F32;
    f.y = a.y + j;
    f.n = rows;
    f.scales = nullptr;
    f.zeros = nullptr;
    if (path == GemmPath::Panel)
      panel_sgemm(isa, f, 0, rows);
    else if (path == GemmPath::Broadcast)
      broadcast_kernel(isa, f, 0, rows);
    else
      rows_kernel(isa, f, 0, rows);
  }
}

// Where Auto switches paths (AVX2; the AVX-512 table follows). Measured with tpbatch_gemm_bench --threads 1 --clock cpu
// --path row-blocked|broadcast|panel-sgemm on Zen 3 (streamed weights, min of 3 interleaved runs,
// load average 2-5 from other jobs; us per call; up = 2048 x 768, down = 768 x 2048, lm_head =
// 32000 x 768):
//   fp32      m:     4         6        16        64       128       256
//   up     rb/bc   666/588   719/625  1251/822  2992/2959 6961/5781  14963/11360  panel 11758 @256
//   down   rb/bc   595/643   687/633  1314/913  4313/2940 8364/5958  panel 3337 @64, 5346 @128
//   lm_head rb/bc 11626/8350 11531/7960 20565/13125 53537/45859  panel 110833 vs bc 88508 @128
// and at --threads 2 (load 4-6): m = 4 up 321/387, down 331/392, lm_head 5207/4924; m = 8 up
// 405/385, down 485/418, lm_head 6644/5961; m = 16 up 657/434, down 683/563; down m = 64 panel
// 1928 vs bc 1959, m = 128 panel 3159 vs bc 3602. So fp32 takes the broadcast kernel from m = 6
// (m = 4 is mixed: bc 12-28% faster at 1 thread, row-blocked 17-19% faster on up/down at 2;
// below 8 rows the kernel's vectors are half padding) up to the panel path, now from m = 128 at
// k = 2048 (panel 10-20% faster there) and 256 at k = 768 (up equal at 256, lm_head 15% slower;
// 512 is the sgemm's); at both sizes of k alike.
// 16-bit weights stay row-blocked: the broadcast kernel, on rows widened into an L1 slice,
// measured 3-17% faster at m = 16 only, slower at m = 12 and 20 (bf16, min of 3-5: up rb/bc
// 704/892 at m = 12, 1215/1682 at m = 20), and fp16 slower at 8-32.
// Panel vs row-blocked for 16-bit (earlier measurement, 1 and 2 threads): the panel path also
// widens each weight once per call, so it wins late: m ~ 96 at k = 768, ~64-96 at k = 2048.
// AVX-512 (Sapphire-Rapids-class Xeon, 2026-12-02; tpbatch_gemm_bench --threads 1 --clock cpu
// --path ..., quiet machine, us per call; rb = row-blocked (AVX2 kernel, the vdpbf16ps one for bf16
// on AVX512_BF16), bc = the zmm broadcast kernel):
//   m:           2          4          6          8         10        16       128          512
//   down F32  401/475    375/447    378/445    454/452                      bc 2270 pan 2663  bc 11968 pan 8456
//   up   F32  401/449    396/435    393/438    471/515                      bc 2334 pan 2843  bc 9357 pan 8457
//   lm   F32 5534/6640  6309/6656  6720/6654  7978/6697                             (m = 256: equal)
//   down BF16 169/372    281/374    356/382    464/389                      bc 2205 pan 3432  bc 11571 pan 12052
//   up   BF16 215/418    325/421    411/432    530/430
//   lm   BF16 3593/6334  6020/6362  7825/6355  8966/6526
//   down F16  170/370    215/370    252/370    322/380   430/409  625/400  bc 2191 pan 3429  bc 11282 pan 12040
//   up   F16                                   374/445   482/427  707/433
//   lm   F16                                  6394/6540 7903/6695
// So on AVX-512: fp32 from m = 8 to the broadcast kernel (at 6 the row-blocked one is still 5-15%
// faster on the layers) and from 256 to OpenBLAS (512: 30% faster than broadcast); fp16 from 10
// (bf16: below, after the AMX table; the rb column here is the two-term vdpbf16ps kernel). The zmm kernel
// beats widening + sgemm for 16-bit weights up to m = 512 (4-8%); from 512 the panel path takes
// over anyway, as the broadcast kernel's packed x^T grows with m (m x k floats per thread).
// AMX, bf16 (same machine and command, x split in three terms in both kernels; us per call, rb = the
// vdpbf16ps row kernel, amx = tiles, bc = the zmm broadcast kernel; xPeak: GFLOP/s over the fp32
// sgemm peak of the core, ~210):
//   m:          1          2          3          4          16          32          128         512
//   down rb/amx 219/239   213/231    285/225    381/223  bc 506/228  bc 691/280  bc 2202/903  bc 13679/6307
//   up   rb/amx 273/288   308/280    391/277    526/277  bc 526/286  bc 728/467  bc 2306/937  bc 9484/5272
//   lm   rb/amx 4238/4429 4759/4307  6290/4356  8334/4357 bc 8194/4502 bc 11575/7310         bc 148397/94553
// The tiles stream the weights at the read bandwidth up to m = 16 and reach 1.2-2.1x the fp32
// sgemm peak at m = 128-512; so bf16 goes to them from m = 2, for every larger m. Without AMX
// (--isa avx512-bf16) the row kernel against the broadcast one: m = 3 down 288/439, up 381/475,
// lm 5853/7288; m = 4 382/439, 509/475, 7966/7425; m = 5 453/440, 499/475, 8452/7511: broadcast
// from m = 4.
// AMD Zen 4 (AVX512_BF16, no AMX; 2026-12-03, tpbatch_gemm_bench --threads 1 --clock cpu --path ...,
// quiet machine; ms per model step of linear layers, 12 x {qkv, o, gate_up, down} + lm_head; rb16 =
// the vdpbf16ps row kernel (--isa avx512-bf16), rb = the AVX2 widening row kernel (--isa avx512), bc =
// the zmm broadcast kernel, pan = widening + sgemm):
//   m:          1      2      3      4      8      12     16     32     64
//   BF16 rb16  19-21  19-21  22-23  27     37                   107    201
//   BF16 rb    11-12  21-22  20-23  23-28  30                   92     173
//   BF16 bc    47-49  47-49  46-49  46-49  46-48         48-49  80     145
//   BF16 pan                               41-45         88-94  123    184-196
//   F16  rb           23            24     31     39
//   F16  bc           46            47     48     48
//   F32  rb           34            39     41(6)  47     55
//   F32  bc           42            42     42(6)  41     41
// The vdpbf16ps kernel loses to widening there, at m = 1 by 2x (hot in cache it is only 15%
// slower: 86 vs 75 us for the down shape, so it is the weight stream it fails to keep full); the
// broadcast kernel has a floor of ~46 ms whatever m is up to 16 (widening into L1 plus one FMA
// per weight per 16 rows), so 16-bit weights stay row-blocked to m = 15 there; fp32 from 8, as on
// the Xeon. Unlike the Xeon's, a Zen 4's vdpbf16ps retires at the FMAs' rate, twice their products
// (tpbatch_gemm_bench --instruction-rates: 3.66 vs 3.65 G/s zmm), but with x in three bf16 terms
// that is 3 instructions per 32 products against the FMAs' 2: only activations rounded to bf16 (one
// term, as llama.cpp's bf16 dot product has them) would turn it into a gain, and that changes the
// results, so compute-bound bf16 steps run at the fp32 FMA rate there (32 rows: 0.77 of sgemm's peak).
int64_t panel_min_rows(GemmIsa isa, DType wtype, int64_t k) {
  if (isa == GemmIsa::Portable) return 8;  // the portable kernel is far below OpenBLAS
  if (amx(isa, wtype)) return 2;
  if (isa >= GemmIsa::Avx512) return wtype == DType::F32 ? 256 : 512;
  const bool deep = k > 1024;
  if (wtype == DType::F32) return deep ? 128 : 256;
  return deep ? 64 : 96;
}

// Rows of x from which the broadcast kernel replaces the row-blocked one (below
// panel_min_rows; see the tables above).
int64_t broadcast_min_rows(GemmIsa isa, DType wtype) {
  constexpr int64_t kNever = INT64_MAX;
  if (isa == GemmIsa::Portable) return kNever;  // no portable broadcast kernel
  if (isa >= GemmIsa::Avx512) {
    if (wtype == DType::F32) return 8;
    if (bf16dp(isa, wtype)) return 4;
    return isa == GemmIsa::Avx512Bf16 ? 16 : 10;  // a Zen 4, or AVX-512 without BF16 (Xeon-measured)
  }
  if (wtype == DType::F32) return 6;
  return kNever;
}

void check_args(const GemmArgs& a) {
  if (a.wtype != DType::F32 && a.wtype != DType::BF16 && a.wtype != DType::F16 && a.wtype != DType::F8E4M3 &&
      a.wtype != DType::I4)
    throw std::invalid_argument(std::string("gemm_nt: weights must be F32, BF16, F16, F8_E4M3 or I4, got ") +
                                dtype_name(a.wtype));
  const bool quantized = a.wtype == DType::F8E4M3 || a.wtype == DType::I4;
  if (quantized != (a.scales != nullptr) || (a.wtype == DType::I4) != (a.zeros != nullptr))
    throw std::invalid_argument("gemm_nt: F8_E4M3 weights need scales, I4 weights scales and zeros, and only they take them");
  if (a.scales && (a.group <= 0 || a.phase < 0 || a.phase >= a.group || a.groups < (a.k + a.phase + a.group - 1) / a.group))
    throw std::invalid_argument("gemm_nt: scale groups (groups=" + std::to_string(a.groups) + " group=" +
                                std::to_string(a.group) + " phase=" + std::to_string(a.phase) + ") do not cover k=" +
                                std::to_string(a.k));
  if (a.m < 0 || a.n < 0 || a.k < 0)
    throw std::invalid_argument("gemm_nt: negative size m=" + std::to_string(a.m) + " n=" + std::to_string(a.n) +
                                " k=" + std::to_string(a.k));
  const int64_t ldw_values = a.wtype == DType::I4 ? 2 * a.ldw : a.ldw;  // I4: two values a byte
  if (a.ldx < a.k || ldw_values < a.k || a.ldy < a.n)
    throw std::invalid_argument("gemm_nt: row stride below the row length (ldx=" + std::to_string(a.ldx) +
                                " ldw=" + std::to_string(a.ldw) + " k=" + std::to_string(a.k) +
                                ", ldy=" + std::to_string(a.ldy) + " n=" + std::to_string(a.n) + ")");
  constexpr int64_t kIntMax = 2147483647;  // OpenBLAS takes int sizes
  if (a.m > kIntMax || a.n > kIntMax || a.ldx > kIntMax || a.ldw > kIntMax || a.ldy > kIntMax)
    throw std::invalid_argument("gemm_nt: a size or stride exceeds 2^31-1");
}

}  // namespace

const char* gemm_path_name(GemmPath path) {
  switch (path) {
    case GemmPath::Auto: return "auto";
    case GemmPath::RowBlocked: return "row-blocked";
    case GemmPath::Broadcast: return "broadcast";
    case GemmPath::Panel: return "panel-sgemm";
  }
  return "?";
}

const char* gemm_isa_name(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::Portable: return "portable";
    case GemmIsa::Avx2Fma: return "avx2-fma-f16c";
    case GemmIsa::Avx512: return "avx512";
    case GemmIsa::Avx512Bf16: return "avx512-bf16";
    case GemmIsa::Amx: return "amx-bf16";
  }
  return "?";
}

bool gemm_isa_named(const char* name, GemmIsa& isa) {
  for (GemmIsa each : {GemmIsa::Portable, GemmIsa::Avx2Fma, GemmIsa::Avx512, GemmIsa::Avx512Bf16, GemmIsa::Amx})
    if (std::string(name) == gemm_isa_name(each)) {
      isa = each;
      return true;
    }
  return false;
}

GemmIsa gemm_isa() { return current_isa(); }

void set_gemm_isa_for_testing(GemmIsa isa) {
  if (isa > detected_isa())
    throw std::invalid_argument(std::string("set_gemm_isa_for_testing: this CPU cannot run ") + gemm_isa_name(isa));
  g_isa_override.store(static_cast<int>(isa), std::memory_order_relaxed);
}

void reset_gemm_isa_for_testing() { g_isa_override.store(-1, std::memory_order_relaxed); }

GemmPath gemm_auto_path(DType wtype, int64_t m, int64_t n, int64_t k) {
  (void)n;
  if (wtype == DType::F8E4M3 || wtype == DType::I4) wtype = DType::F32;  // fp32 kernels on dequantized slices
  const GemmIsa isa = current_isa();
  if (m >= panel_min_rows(isa, wtype, k)) return GemmPath::Panel;
  if (m >= broadcast_min_rows(isa, wtype)) return GemmPath::Broadcast;
  return GemmPath::RowBlocked;
}

void gemm_nt(const float* x, const void* w, DType wtype, float* y, int64_t m, int64_t n, int64_t k) {
  gemm_nt(x, k, w, k, wtype, y, n, m, n, k, GemmPath::Auto);
}

void gemm_nt(const float* x, int64_t ldx, const void* w, int64_t ldw, DType wtype, float* y, int64_t ldy, int64_t m,
             int64_t n, int64_t k, GemmPath path) {
  run_gemm(GemmArgs{x, ldx, w, ldw, wtype, y, ldy, m, n, k}, path);
}

void gemm_nt_scaled(const float* x, const uint8_t* w, const GemmScales& s, float* y, int64_t m, int64_t n, int64_t k,
                    GemmPath path) {
  GemmArgs a{x, k, w, k, DType::F8E4M3, y, n, m, n, k};
  a.scales = s.scales;
  a.groups = s.groups;
  a.group = s.group;
  a.phase = s.phase;
  run_gemm(a, path);
}

void gemm_nt_int4(const float* x, const uint8_t* w, const GemmScales& s, float* y, int64_t m, int64_t n, int64_t k,
                  GemmPath path) {
  GemmArgs a{x, k, w, (k + 1) / 2, DType::I4, y, n, m, n, k};
  a.scales = s.scales;
  a.groups = s.groups;
  a.group = s.group;
  a.phase = s.phase;
  a.zeros = s.zeros;
  run_gemm(a, path);
}

namespace {

void run_gemm(const GemmArgs& a, GemmPath path) {
  const int64_t m = a.m, n = a.n, k = a.k;
  float* y = a.y;
  const int64_t ldy = a.ldy;
  check_args(a);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(y + i * ldy, y + i * ldy + n, 0.0f);
    return;
  }
  const GemmIsa isa = current_isa();
  if (path == GemmPath::Auto) path = gemm_auto_path(a.wtype, m, n, k);
  if (path == GemmPath::Panel && openblas_get_num_threads() != 1) openblas_set_num_threads(1);

  // Threads split n in units of 16 weight rows; a problem too small to pay for waking the team
  // (OpenMP workers sleep after a short spin) runs on the calling thread.
  constexpr int64_t kUnit = 16;
  const int64_t units = (n + kUnit - 1) / kUnit;
  const double flops = 2.0 * double(m) * double(n) * double(k);
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (flops < 2.0e5) threads = 1;
  threads = int(std::min<int64_t>(threads, units));
  auto run_slice = [&](int t, int nt) {
    const int64_t n0 = std::min(n, units * t / nt * kUnit), n1 = std::min(n, units * (t + 1) / nt * kUnit);
    if (a.wtype == DType::F8E4M3 || a.wtype == DType::I4)
      scaled_slices(isa, a, n0, n1, path);
    else if (path == GemmPath::Panel)
      panel_sgemm(isa, a, n0, n1);
    else if (path == GemmPath::Broadcast)
      broadcast_kernel(isa, a, n0, n1);
    else
      rows_kernel(isa, a, n0, n1);
  };
  if (threads <= 1) {
    run_slice(0, 1);
    return;
  }
#pragma omp parallel num_threads(threads)
  run_slice(omp_get_thread_num(), omp_get_num_threads());
}

}  // namespace

}  // namespace tpbatch::cpu
