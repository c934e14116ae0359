#pragma once
// The CPU GEMM of every linear layer: y[m,n] = x[m,k] · w[n,k]^T, with the weights in the
// Hugging Face [out, in] layout and in their storage type (F32, BF16 or F16), activations and
// accumulation in fp32.
//
// Three paths, chosen by the number of rows m (the crossovers were measured with
// benchmarks/gemm_bench.cpp, see gemm.cpp):
//  - row-blocked (decode, small m): each block of weight rows is read from memory once and used
//    for every row of x while it sits in L1, so the cost is the weight stream until m makes it
//    compute-bound. 16-bit weights are widened in registers (bf16: a 16-bit shift; fp16: F16C), or
//    on AVX512_BF16 CPUs bf16 weights go through vdpbf16ps unwidened (gemm_avx512_bf16.cpp).
//  - broadcast (decode batches; AVX2: fp32 weights, m = 6..127-255; AVX-512: every weight type,
//    from m = 6-10 to 255-511): y^T = W · x^T, x^T packed 16 rows wide once per call, each
//    weight broadcast against 16 rows of x with no horizontal sums; still one read of the weights
//    per call, at a higher arithmetic rate.
//  - panel (prefill, large m): a panel of weight rows, widened to fp32 in a thread-local scratch
//    when 16-bit, goes through single-threaded OpenBLAS sgemm; on AMX CPUs bf16 weights go to
//    AMX tiles instead (gemm_amx.cpp), from m = 3.
//
// Threading: ONE thread team, OpenMP's. gemm_nt splits n over omp_get_max_threads() threads when
// called from serial code; called inside an active parallel region it runs on the calling thread
// alone (nested regions are inactive), so a caller may also split the work itself. OpenBLAS is
// only ever called from inside those threads, single-threaded: before the panel path calls it,
// gemm_nt sets openblas_set_num_threads(1) (process-wide; again whenever someone changed it) so
// OpenBLAS's pthreads pool never competes with OpenMP's threads for the cores.
#include <cstdint>

#include "backend/dtype.h"

namespace tpbatch::cpu {

// y[m,n] = x[m,k] · w[n,k]^T. x, y: fp32 row-major (row strides k and n). w: row-major [n][k] in
// wtype (F32, BF16 or F16). Parallel over the OpenMP team (see above).
void gemm_nt(const float* x, const void* w, DType wtype, float* y, int64_t m, int64_t n, int64_t k);

// Broadcast: y^T = W · x^T with each weight broadcast against 16 (or 8) rows of x at once, no
// horizontal sums (AVX2; on the portable ISA it runs the row-blocked kernel).
enum class GemmPath : uint8_t { Auto, RowBlocked, Broadcast, Panel };

// The general form: row strides ldx >= k, ldw >= k (in elements of wtype), ldy >= n; `path`
// forces one path (tests, benchmark). Throws std::invalid_argument on a bad dtype or stride.
void gemm_nt(const float* x, int64_t ldx, const void* w, int64_t ldw, DType wtype, float* y, int64_t ldy,
             int64_t m, int64_t n, int64_t k, GemmPath path = GemmPath::Auto);

// Quantized weights: w is [n][k] F8_E4M3 values, weight[r][c] = fp8(w[r][c]) * scales[r * groups +
// (c + phase) / group] (backend.h's ScaledWeightView). Computed like F32 weights on slices of rows
// dequantized on the fly: the same result as dequantizing first, with one byte read per weight.
// The e4m3 NaN code (S.1111.111) is not a weight here: the AVX2 kernels read it as a finite value
// (the loader refuses checkpoints holding it, model/weight_checks.h); scales below 2^120.
struct GemmScales {
  const float* scales = nullptr;
  int64_t groups = 1, group = 1, phase = 0;
  const float* zeros = nullptr;  // gemm_nt_int4 only
};
void gemm_nt_scaled(const float* x, const uint8_t* w, const GemmScales& scales, float* y, int64_t m, int64_t n,
                    int64_t k, GemmPath path = GemmPath::Auto);
// 4-bit weights: w is [n][(k + 1) / 2] bytes of two values (low nibble first, column 0 at the
// start of each row), weight[r][c] = (value[r][c] - zeros[i]) * scales[i], i = r * groups + (c +
// phase) / group. The same slice-at-a-time dequantization, half a byte read per weight.
void gemm_nt_int4(const float* x, const uint8_t* w, const GemmScales& scales, float* y, int64_t m, int64_t n,
                  int64_t k, GemmPath path = GemmPath::Auto);

// W8A8 (8-bit integer weights, compressed-tensors int-quantized): w is [n][k] I8 values with one
// fp32 scale per output row. Each row i of x is quantized first, symmetric per token as vLLM's
// dynamic int8 activations are: s_i = max_c |x[i][c]| / 127, q[i][c] = x[i][c] / s_i rounded to
// nearest even (clamped to +-127; a zero row quantizes to zeros, a row with a NaN or infinity
// gives NaN outputs); then an exact int32 dot product, scaled back:
//   y[i][j] = float(sum_c q[i][c] * w[j][c]) * s_i * scales[j]   (left to right, in fp32).
// Both kernels (AVX512-VNNI, portable) compute exactly that, bit for bit. k at most 131072 (the
// int32 sums cannot overflow). Parallel over the OpenMP team like gemm_nt.
// input_amax (optional, [m]): max_c |x[i][c]| of the whole row when x holds a slice of its columns
// (a row-parallel layer: the ranks' int8_row_amax combined by max), so that s_i is the whole
// row's; the slice's own when null. A NaN or an infinity anywhere in the row: +inf, NaN outputs.
void gemm_nt_int8(const float* x, const int8_t* w, const float* scales, float* y, int64_t m, int64_t n, int64_t k,
                  const float* input_amax = nullptr);
// amax[i] = max_c |x[i][c]| for rows [0, m) of k columns, +inf for a row with a NaN or an infinity.
void int8_row_amax(const float* x, int64_t m, int64_t k, float* amax);
// The kernel gemm_nt_int8 takes: "avx512-vnni", "avx2" or "portable" (what the CPU has, unless a
// test forced a lower ISA).
const char* gemm_int8_kernel();

// The path Auto takes for this shape and type, and its name ("row-blocked", "broadcast",
// "panel-sgemm").
GemmPath gemm_auto_path(DType wtype, int64_t m, int64_t n, int64_t k);
const char* gemm_path_name(GemmPath path);

// Instruction set of the hand-written kernels, detected once at run time (the project compiles
// for x86-64-v2). Each level includes the ones before it: Avx512 adds the zmm broadcast kernel for
// fp32 weights, Avx512Bf16 (a CPU with AVX512_BF16 but no AMX, such as a Zen 4) the same kernels
// with its own crossovers (vdpbf16ps measured slower there than widening), Amx AMX tiles and the
// vdpbf16ps row kernel for bf16 weights (gemm_amx.cpp, gemm_avx512_bf16.cpp; the CPU has AMX-BF16
// and Linux granted the tile state); the other weight types keep the AVX2 kernels there.
enum class GemmIsa : uint8_t { Portable, Avx2Fma, Avx512, Avx512Bf16, Amx };
GemmIsa gemm_isa();
const char* gemm_isa_name(GemmIsa isa);
// The kernel family gemm_isa_name calls `name`; false if no family has that name.
bool gemm_isa_named(const char* name, GemmIsa& isa);
// Forces a kernel family (tests of the portable fallback). Asking for one the CPU lacks throws.
void set_gemm_isa_for_testing(GemmIsa isa);
void reset_gemm_isa_for_testing();  // back to the detected one

}  // namespace tpbatch::cpu
