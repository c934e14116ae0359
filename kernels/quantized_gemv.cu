// y[m,n] = x[m,k] · wᵀ for a few rows of x (decode) with quantized weights dequantized in
// registers: each weight is read once, as its one byte (fp8) or half byte (I4), never written out
// as BF16. One warp per output row; lanes sum in fp32 and combine by shuffles.
// Two paths. The packed one (every real checkpoint's shapes) moves 16 weight bytes per lane and
// load, a whole chunk in one scale group, so the group's index is one 32-bit division a chunk and
// its scale multiplies the chunk's sum: for fp8, (s * 2^120) * Σ (e4m3 * 2^-120) x; for I4,
// s * Σ (q - zero) x; weights decoded by integer operations (see below). The
// scalar path, a weight per lane and step, takes the rest (odd k, groups or phases that cut
// chunks, unaligned buffers) and multiplies each weight by its scale first.
// CPU twin: quant_rows_m1 (src/backend/cpu/gemm/quant_rows_m1.h), which does the same for one row
// of x; both start from the fp32 value quantized_weight.cuh defines (the packed path applies the
// scale after the sum: the same products to fp32 accumulation noise, single weights exactly).
#include "kernels.h"
#include "quantized_weight.cuh"

namespace tpbatch::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;

template <bool kInt4, typename X, typename Y>
__global__ void quantized_gemv_kernel(const X* x, QuantGrid g, Y* y, int64_t m, int64_t n, int64_t k) {
  const int64_t row = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;  // the whole warp: row is the warp's
  float acc[kQuantizedGemvMaxRows] = {};
  for (int64_t c = lane; c < k; c += 32) {
    const float w = dequantized<kInt4>(g, row, c);
#pragma unroll
    for (int i = 0; i < kQuantizedGemvMaxRows; ++i)
      if (i < m) acc[i] += to_float(x[i * k + c]) * w;
  }
#pragma unroll
  for (int i = 0; i < kQuantizedGemvMaxRows; ++i) {
    if (i >= m) break;
    const float sum = warp_sum(acc[i]);
    if (lane == 0) y[i * n + row] = from_float<Y>(sum);
  }
}

// Four e4m3 bytes as fp32 values 2^-120 times theirs, by integer operations alone (conversion
// instructions issue at a fraction of the FMA rate): each byte's 7 magnitude bits shifted into
// fp32's exponent and mantissa (e4m3 exponent bias 7 -> 127: the factor; an e4m3 subnormal
// becomes an fp32 subnormal of the same factor, which the GPU multiplies exactly unless built to
// flush subnormals) and its sign into fp32's. NaN codes come out finite: fp8x4_has_nan finds them.
__device__ __forceinline__ void fp8x4_times_2_pow_minus_120(uint32_t w, float* out) {
  out[0] = __uint_as_float(((w << 20) & 0x07f00000u) | ((w << 24) & 0x80000000u));
  out[1] = __uint_as_float(((w << 12) & 0x07f00000u) | ((w << 16) & 0x80000000u));
  out[2] = __uint_as_float(((w << 4) & 0x07f00000u) | ((w << 8) & 0x80000000u));
  out[3] = __uint_as_float(((w >> 4) & 0x07f00000u) | (w & 0x80000000u));
}

// Whether one of the four bytes is an e4m3 NaN (magnitude 0x7f): adding 1 to each 7-bit
// magnitude carries into its byte's top bit only there.
__device__ __forceinline__ bool fp8x4_has_nan(uint32_t w) {
  return (((w & 0x7f7f7f7fu) + 0x01010101u) & 0x80808080u) != 0;
}

// The fp32 whose bits are 0x4B000000 | q is 2^23 + q exactly: a 4-bit value to fp32 without a
// conversion instruction.
constexpr float kMagic = 8388608.0f;  // 2^23

template <bool kInt4, typename X, typename Y>
__global__ void quantized_gemv_packed_kernel(const X* x, QuantGrid g, Y* y, int m, int64_t n, int k) {
  constexpr int kPerChunk = kInt4 ? 32 : 16;  // weights in 16 bytes
  constexpr int kXPack = Pack<X>::N;
  const int64_t row = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;  // the whole warp: row is the warp's
  const uint4* wrow = reinterpret_cast<const uint4*>(g.values + row * g.ldv);
  const float* srow = g.scales + row * g.groups;
  const float* zrow = kInt4 ? g.zeros + row * g.groups : nullptr;
  const int chunks = k / kPerChunk, group = int(g.group), phase = int(g.phase);
  float acc[kQuantizedGemvMaxRows] = {};
#pragma unroll 2
  for (int ch = lane; ch < chunks; ch += 32) {
    const uint4 packed = __ldg(wrow + ch);
    const uint32_t words[4] = {packed.x, packed.y, packed.z, packed.w};
    const int c0 = ch * kPerChunk, gi = (c0 + phase) / group;
    float w[kPerChunk];
    float scale = srow[gi];
    if constexpr (kInt4) {
      // q - zero; with an integral zero (every real format's) in one subtraction from 2^23 + q.
      const float zero = zrow[gi], biased = kMagic + zero;
      const bool integral = biased - kMagic == zero;
#pragma unroll
      for (int j = 0; j < kPerChunk; ++j) {
        const float q = __uint_as_float(((words[j / 8] >> (4 * (j % 8))) & 0xfu) | 0x4B000000u);
        w[j] = integral ? q - biased : (q - kMagic) - zero;
      }
    } else {
#pragma unroll
      for (int q = 0; q < 4; ++q) fp8x4_times_2_pow_minus_120(words[q], w + 4 * q);
      const float scaled = scale * 0x1p120f;
      const bool nan = fp8x4_has_nan(words[0]) | fp8x4_has_nan(words[1]) | fp8x4_has_nan(words[2]) |
                       fp8x4_has_nan(words[3]);
      if (!nan && scaled <= 3.0e38f && scaled >= -3.0e38f) {
        scale = scaled;
      } else {  // NaN codes, or a scale of 2^8 or more (2^120 times it would overflow): exact values
#pragma unroll
        for (int j = 0; j < kPerChunk; ++j) w[j] = fp8_e4m3_to_float((words[j / 4] >> (8 * (j % 4))) & 0xffu);
      }
    }
#pragma unroll
    for (int i = 0; i < kQuantizedGemvMaxRows; ++i) {
      if (i >= m) break;
      const X* xr = x + int64_t(i) * k + c0;
      float dot = 0.0f;
#pragma unroll
      for (int p = 0; p < kPerChunk / kXPack; ++p) {
        const Pack<X> xp = load_pack(xr + p * kXPack);
#pragma unroll
        for (int j = 0; j < kXPack; ++j) dot += w[p * kXPack + j] * to_float(xp.v[j]);
      }
      acc[i] += scale * dot;
    }
  }
#pragma unroll
  for (int i = 0; i < kQuantizedGemvMaxRows; ++i) {
    if (i >= m) break;
    const float sum = warp_sum(acc[i]);
    if (lane == 0) y[i * n + row] = from_float<Y>(sum);
  }
}

}  // namespace

void quantized_gemv(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n, int64_t k,
                    cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  if (m > kQuantizedGemvMaxRows)
    throw Error("CUDA backend: quantized_gemv: " + std::to_string(m) + " rows of x, more than " +
                std::to_string(kQuantizedGemvMaxRows));
  const QuantGrid g = quant_grid(w, k, "quantized_gemv");
  const unsigned blocks = blocks_for(size_t(n), kWarpsPerBlock);
  const int64_t per_chunk = g.int4 ? 32 : 16;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  // Whole 16-byte chunks in every row and scale group, and 16-byte aligned rows of w and x.
  const bool packed = k % per_chunk == 0 && g.ldv % 16 == 0 && g.group % per_chunk == 0 &&
                      g.phase % per_chunk == 0 && k < (int64_t{1} << 30) && g.phase + k < (int64_t{1} << 30) &&
                      aligned(g.values) && aligned(x.data);
  dispatch_act(x.dtype, "quantized_gemv", "x", [&](auto xt) {
    dispatch_act(y.dtype, "quantized_gemv", "y", [&](auto yt) {
      using X = typename decltype(xt)::type;
      using Y = typename decltype(yt)::type;
      const X* xs = x.as<X>();
      Y* ys = y.as<Y>();
      if (packed && g.int4)
        quantized_gemv_packed_kernel<true, X, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(xs, g, ys, int(m), n, int(k));
      else if (packed)
        quantized_gemv_packed_kernel<false, X, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(xs, g, ys, int(m), n, int(k));
      else if (g.int4)
        quantized_gemv_kernel<true, X, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(xs, g, ys, m, n, k);
      else
        quantized_gemv_kernel<false, X, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(xs, g, ys, m, n, k);
    });
  });
}

}  // namespace tpbatch::kernels
