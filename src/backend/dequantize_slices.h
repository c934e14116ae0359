#pragma once
// How the CUDA backend runs quantized weights through cuBLAS (CudaBackend::matmul_nt_scaled): a
// slice of output rows at a time is dequantized into a BF16 scratch, then multiplied, so the
// weights stay quantized in device memory and the scratch stays bounded. Here, not in the CUDA
// files, because `plan` counts the same scratch on builds without CUDA.
#include <algorithm>
#include <atomic>
#include <cstdint>

namespace tpbatch {

// The scratch a slice may take (BF16, 2 bytes a weight): a few layers' worth on small models, and
// at most one Llama-8B gate|up slice of 8192 rows x 4096.
inline constexpr int64_t kDequantizeScratchBytes = int64_t{64} << 20;

namespace detail {
inline std::atomic<int64_t> dequantize_scratch_limit{kDequantizeScratchBytes};
}
// Tests shrink the bound to run the many-slice path on small weights; 0 restores it.
inline void set_dequantize_scratch_bytes_for_testing(int64_t bytes) {
  detail::dequantize_scratch_limit.store(bytes > 0 ? bytes : kDequantizeScratchBytes);
}

// Output rows of an [n, k] weight dequantized per slice: as many as the scratch holds, at least one.
inline int64_t dequantize_slice_rows(int64_t n, int64_t k) {
  return std::clamp<int64_t>(detail::dequantize_scratch_limit.load() / (2 * std::max<int64_t>(k, 1)), 1,
                             std::max<int64_t>(n, 1));
}

// The scratch bytes an [n, k] quantized weight needs.
inline int64_t dequantize_scratch_bytes(int64_t n, int64_t k) { return dequantize_slice_rows(n, k) * k * 2; }

}  // namespace tpbatch
