#pragma once
// The CPU element-wise operations whose cost is exp: SwiGLU's silu gate, the LM head's softmax
// sum and the prefill attention's softmax weights. Both ran scalar libm exp (the sum in double): with 32 rows, 7-10% of a 125M decode step and 5%
// of a prefill (perf, 1 thread). On AVX2 + FMA CPUs they use vector_exp.h's exp8, elsewhere its scalar
// twin; either way within vector_exp.h's stated error of exp.
#include <cstdint>

namespace tpbatch::cpu {

// out[r][i] = silu(g) * u with g = gu[r][i], u = gu[r][inter + i] (the fused gate_up output).
// Parallel over the OpenMP team when called from serial code.
void silu_mul(const float* gu, float* out, int64_t m, int64_t inter);

// Σ_j exp(x[j] - shift), accumulated in double. NaN if any x[j] is NaN (a broken logit row must not
// look like a valid distribution); x[j] = -inf adds 0.
double sum_exp_shifted(const float* x, int64_t n, float shift);

// x[j] = exp(x[j] - shift) for j < n, and their sum in float (the attention tile's softmax
// weights of one query over one KV block).
float exp_shifted_in_place(float* x, int64_t n, float shift);

// Which code ran (tests of the portable twin on AVX2 machines).
bool exp_ops_vectorised();
void set_exp_ops_vectorised_for_testing(bool on);  // on: only if the CPU has AVX2 + FMA

}  // namespace tpbatch::cpu
