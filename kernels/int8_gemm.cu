// W8A8 (8-bit integer weights, compressed-tensors int-quantized): each row of x quantized to int8
// with one scale, then exact int32 dot products against the I8 weights, scaled back in fp32:
//   s_i = amax_i / 127, q[i][c] = x[i][c] / s_i rounded to nearest even, clamped to +-127,
//   y[i][j] = float(sum_c q[i][c] * w[j][c]) * s_i * scales[j]   (left to right).
// A zero row quantizes to zeros (scale 0), a row with a NaN or an infinity has amax +inf and NaN
// outputs. CPU twin: gemm_nt_int8 and int8_row_amax (src/backend/cpu/gemm/gemm_int8.cpp); the same
// rounding and integer sums, so on the same fp32 x both give the same bits.
// The products: a warp per weight row for a few rows of x (decode: each weight byte read once,
// 16 at a load, __dp4a), a 64 x 64 shared-memory tile for more (prefill).
#include <string>

#include "common.cuh"
#include "kernels.h"

namespace tpbatch::kernels {
namespace {

constexpr int kRowThreads = 256;  // one block per row of x for the amax and the quantization

// |v|, or +inf for a NaN or an infinity (so the block's max is +inf where the row holds one).
__device__ __forceinline__ float magnitude(float v) {
  const unsigned bits = __float_as_uint(v) & 0x7fffffffu;
  return bits >= 0x7f800000u ? __uint_as_float(0x7f800000u) : __uint_as_float(bits);
}

template <typename X>
__device__ float row_amax(const X* xr, int64_t k) {
  float a = 0.0f;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) a = fmaxf(a, magnitude(to_float(xr[c])));
  return block_max(a);
}

template <typename X>
__global__ void int8_row_amax_kernel(const X* x, float* amax, int64_t k) {
  const float a = row_amax(x + blockIdx.x * k, k);
  if (threadIdx.x == 0) amax[blockIdx.x] = a;
}

template <typename X>
__global__ void int8_quantize_rows_kernel(const X* x, const float* input_amax, int8_t* xq, float* xscale, int64_t k) {
  const X* xr = x + blockIdx.x * k;
  int8_t* q = xq + blockIdx.x * k;
  const float amax = input_amax ? input_amax[blockIdx.x] : row_amax(xr, k);
  if (amax == 0.0f || !(amax < __uint_as_float(0x7f800000u))) {
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x) q[c] = 0;
    if (threadIdx.x == 0) xscale[blockIdx.x] = amax == 0.0f ? 0.0f : __uint_as_float(0x7fc00000u);
    return;
  }
  const float scale = amax / 127.0f;
  for (int64_t c = threadIdx.x; c < k; c += blockDim.x) {
    const float r = rintf(to_float(xr[c]) / scale);
    q[c] = int8_t(r < -127.0f ? -127.0f : (r > 127.0f ? 127.0f : r));
  }
  if (threadIdx.x == 0) xscale[blockIdx.x] = scale;
}

constexpr int kWarpsPerBlock = 4;

// A warp per weight row, m <= kQuantizedGemvMaxRows. kChunks: k a multiple of 16 and 16-byte
// aligned rows, 16 bytes a load; else a byte a lane and step.
template <bool kChunks, typename Y>
__global__ void int8_gemv_kernel(const int8_t* xq, const float* xscale, const int8_t* w, const float* wscale, Y* y,
                                 int m, int64_t n, int64_t k) {
  const int64_t row = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= n) return;  // the whole warp: row is the warp's
  const int8_t* wr = w + row * k;
  int acc[kQuantizedGemvMaxRows] = {};
  if constexpr (kChunks) {
    for (int64_t ch = lane; ch < k / 16; ch += 32) {
      const int4 wv = __ldg(reinterpret_cast<const int4*>(wr) + ch);
#pragma unroll
      for (int i = 0; i < kQuantizedGemvMaxRows; ++i) {
        if (i >= m) break;
        const int4 xv = *(reinterpret_cast<const int4*>(xq + i * k) + ch);
        acc[i] = __dp4a(xv.x, wv.x, acc[i]);
        acc[i] = __dp4a(xv.y, wv.y, acc[i]);
        acc[i] = __dp4a(xv.z, wv.z, acc[i]);
        acc[i] = __dp4a(xv.w, wv.w, acc[i]);
      }
    }
  } else {
    for (int64_t c = lane; c < k; c += 32) {
      const int wv = wr[c];
#pragma unroll
      for (int i = 0; i < kQuantizedGemvMaxRows; ++i) {
        if (i >= m) break;
        acc[i] += int(xq[i * k + c]) * wv;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kQuantizedGemvMaxRows; ++i) {
    if (i >= m) break;
    const int sum = warp_sum(acc[i]);
    if (lane == 0) y[i * n + row] = from_float<Y>(float(sum) * xscale[i] * wscale[row]);
  }
}

constexpr int kTile = 64;   // rows of x and rows of w a block multiplies
constexpr int kTileWords = 8;  // 32 bytes of k a step, as 4-byte words
constexpr int kTileThreads = 256;  // each 4 x 4 outputs

// Four bytes of row r at columns [c, c + 4) as one word (zeros past the row's end or past the last
// row, which add nothing to the sums); one 4-byte load where the row allows it.
__device__ __forceinline__ int word_at(const int8_t* a, int64_t rows, int64_t k, int64_t r, int64_t c, bool words) {
  if (r >= rows || c >= k) return 0;
  const int8_t* p = a + r * k + c;
  if (words && c + 4 <= k) return *reinterpret_cast<const int*>(p);
  unsigned v = 0;
  for (int b = 0; b < 4 && c + b < k; ++b) v |= unsigned(uint8_t(p[b])) << (8 * b);
  return int(v);
}

// words: k a multiple of 4 and both bases 4-byte aligned.
template <typename Y>
__global__ void int8_gemm_tile_kernel(const int8_t* xq, const float* xscale, const int8_t* w, const float* wscale, Y* y,
                                      int64_t m, int64_t n, int64_t k, bool words) {
  __shared__ int xs[kTileWords][kTile];
  __shared__ int ws[kTileWords][kTile];
  const int64_t m0 = int64_t(blockIdx.y) * kTile, n0 = int64_t(blockIdx.x) * kTile;
  const int t = threadIdx.x, tx = t % 16, ty = t / 16;
  int acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += 4 * kTileWords) {
    for (int u = t; u < kTile * kTileWords; u += kTileThreads) {
      const int r = u / kTileWords, kw = u % kTileWords;
      xs[kw][r] = word_at(xq, m, k, m0 + r, k0 + 4 * kw, words);
      ws[kw][r] = word_at(w, n, k, n0 + r, k0 + 4 * kw, words);
    }
    __syncthreads();
#pragma unroll
    for (int kw = 0; kw < kTileWords; ++kw) {
      int a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = xs[kw][ty * 4 + i], b[i] = ws[kw][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t r = m0 + ty * 4 + i;
    if (r >= m) break;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = n0 + tx * 4 + j;
      if (c < n) y[r * n + c] = from_float<Y>(float(acc[i][j]) * xscale[r] * wscale[c]);
    }
  }
}

bool aligned(const void* p, uintptr_t to) { return reinterpret_cast<uintptr_t>(p) % to == 0; }

}  // namespace

void int8_row_amax(BufferView x, BufferView amax, int64_t m, int64_t k, cudaStream_t stream) {
  if (m <= 0) return;
  if (amax.dtype != DType::F32) unsupported("int8_row_amax", "amax", amax.dtype);
  dispatch_act(x.dtype, "int8_row_amax", "x", [&](auto xt) {
    using X = typename decltype(xt)::type;
    int8_row_amax_kernel<X><<<unsigned(m), kRowThreads, 0, stream>>>(x.as<X>(), amax.as<float>(), k);
  });
}

void int8_quantize_rows(BufferView x, const float* input_amax, int8_t* xq, float* xscale, int64_t m, int64_t k,
                        cudaStream_t stream) {
  if (m <= 0) return;
  dispatch_act(x.dtype, "int8_quantize_rows", "x", [&](auto xt) {
    using X = typename decltype(xt)::type;
    int8_quantize_rows_kernel<X><<<unsigned(m), kRowThreads, 0, stream>>>(x.as<X>(), input_amax, xq, xscale, k);
  });
}

void int8_gemm(const int8_t* xq, const float* xscale, const int8_t* w, const float* wscale, BufferView y, int64_t m,
               int64_t n, int64_t k, cudaStream_t stream) {
  if (m <= 0 || n <= 0) return;
  dispatch_act(y.dtype, "int8_gemm", "y", [&](auto yt) {
    using Y = typename decltype(yt)::type;
    Y* ys = y.as<Y>();
    if (m <= kQuantizedGemvMaxRows) {
      const unsigned blocks = blocks_for(size_t(n), kWarpsPerBlock);
      if (k % 16 == 0 && aligned(xq, 16) && aligned(w, 16))
        int8_gemv_kernel<true, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(xq, xscale, w, wscale, ys, int(m), n, k);
      else
        int8_gemv_kernel<false, Y><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(xq, xscale, w, wscale, ys, int(m), n, k);
      return;
    }
    const dim3 grid(blocks_for(size_t(n), kTile), blocks_for(size_t(m), kTile));
    const bool words = k % 4 == 0 && aligned(xq, 4) && aligned(w, 4);
    int8_gemm_tile_kernel<Y><<<grid, kTileThreads, 0, stream>>>(xq, xscale, w, wscale, ys, m, n, k, words);
  });
}

}  // namespace tpbatch::kernels
