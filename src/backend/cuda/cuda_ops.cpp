// The CUDA backend's operations: cuBLAS GEMMs and kernel launches for everything but the step's
// tables and attention (cuda_step.cpp), the mixture-of-experts combine and the draw on the device.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "common/error.h"

namespace tpbatch {
namespace {

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: throw Error(std::string("CUDA backend: matmul_nt: dtype ") + dtype_name(t) + " is not a GEMM type");
  }
}

}  // namespace

void CudaBackend::matmul_nt(BufferView x, BufferView w, BufferView y, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  // cuBLAS takes both operands in one type: the weight's. Activations of another dtype are
  // converted first (F32 weights of a `dtype: float32` job with bf16 activations: to F32, then
  // TF32 tensor cores). The output goes straight to y when cuBLAS can write y's dtype, else
  // through F32 scratch.
  const DType ab = w.dtype;
  (void)cuda_type(ab);  // refuses a weight dtype cuBLAS does not take before anything is queued
  BufferView xb = x;
  if (x.dtype != ab) {
    xb = BufferView{scratch(gemm_x_, static_cast<size_t>(m * k) * dtype_size(ab), "CUDA matmul scratch"), ab};
    kernels::convert(x, xb, static_cast<size_t>(m * k), stream_);
    TPBATCH_CUDA_LAUNCHED("convert (matmul_nt input)");
  }
  const bool direct = y.dtype == DType::F32 || (y.dtype == ab && ab != DType::F32);
  BufferView yc = direct ? y
                         : BufferView{scratch(gemm_y_, static_cast<size_t>(m * n) * sizeof(float), "CUDA matmul scratch"),
                                      DType::F32};
  cublas_nt(xb, w, yc, m, n, k, n);
  if (!direct) {
    kernels::convert(yc, y, static_cast<size_t>(m * n), stream_);
    TPBATCH_CUDA_LAUNCHED("convert (matmul_nt output)");
  }
}

void CudaBackend::cublas_nt(BufferView x, BufferView w, BufferView y, int64_t m, int64_t n, int64_t k, int64_t ldy) {
  const cudaDataType_t ab_type = cuda_type(w.dtype);
  const cublasComputeType_t compute = w.dtype == DType::F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  // Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T (n x m) = w (k x n)^T · x^T (k x m).
  TPBATCH_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &one, w.data, ab_type, static_cast<int>(k), x.data, ab_type,
                                    static_cast<int>(k), &zero, y.data, cuda_type(y.dtype), static_cast<int>(ldy),
                                    compute, CUBLAS_GEMM_DEFAULT));
}

void CudaBackend::add_bias(BufferView x, BufferView bias, int64_t m, int64_t n) {
  kernels::add_bias(x, bias, m, n, stream_);
  TPBATCH_CUDA_LAUNCHED("add_bias");
}

void CudaBackend::add(BufferView x, BufferView y, size_t count) {
  kernels::add(x, y, count, stream_);
  TPBATCH_CUDA_LAUNCHED("add");
}

void CudaBackend::rmsnorm(BufferView x, BufferView w, BufferView out, int64_t m, int64_t n, float eps) {
  kernels::rmsnorm(x, w, out, m, n, eps, stream_);
  TPBATCH_CUDA_LAUNCHED("rmsnorm");
}

void CudaBackend::add_rmsnorm(BufferView x, BufferView residual, BufferView w, BufferView out, int64_t m, int64_t n,
                              float eps) {
  kernels::add_rmsnorm(x, residual, w, out, m, n, eps, stream_);
  TPBATCH_CUDA_LAUNCHED("add_rmsnorm");
}

void CudaBackend::rope(BufferView x, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView inv_freq) {
  kernels::rope(x, step_.rows, row_stride, heads, head_dim, inv_freq, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("rope");
}

void CudaBackend::silu_mul(BufferView gu, BufferView out, int64_t m, int64_t inter) {
  kernels::silu_mul(gu, out, m, inter, stream_);
  TPBATCH_CUDA_LAUNCHED("silu_mul");
}
void CudaBackend::embedding(BufferView table, int64_t vocab_begin, int64_t vocab_end, int64_t dim, BufferView out) {
  kernels::embedding(table, vocab_begin, vocab_end, dim, out, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("embedding");
}

void CudaBackend::gather_logit_rows(BufferView x, int64_t dim, int64_t first, int64_t count, BufferView out) {
  kernels::gather_logit_rows(x, dim, first, count, out, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("gather_logit_rows");
}

void CudaBackend::copy_rows(BufferView src, int64_t src_stride, std::span<const int64_t> rows, int64_t width,
                            BufferView dst, int64_t dst_stride) {
  if (rows.empty() || width == 0) return;
  if (src.dtype != dst.dtype) throw Error("CUDA backend: copy_rows: source and destination dtypes differ");
  if (width > src_stride || width > dst_stride)
    throw Error("CUDA backend: copy_rows: width " + std::to_string(width) + " above a row stride");
  const size_t es = dtype_size(src.dtype);
  // Runs of consecutive source rows go as one 2D copy each (a prefill's rows are one run).
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rows[j] == rows[j - 1] + 1) ++j;
    TPBATCH_CUDA_CHECK(cudaMemcpy2DAsync(dst.at(static_cast<int64_t>(i) * dst_stride).data, dst_stride * es,
                                         src.at(rows[i] * src_stride).data, src_stride * es, width * es, j - i,
                                         cudaMemcpyDeviceToDevice, stream_));
    i = j;
  }
}

void CudaBackend::mask_logits(BufferView logits, int64_t rows, int64_t vocab_shard, BufferView bits) {
  kernels::mask_logits(logits, rows, vocab_shard, bits, stream_);
  TPBATCH_CUDA_LAUNCHED("mask_logits");
}

void CudaBackend::logit_stats(BufferView logits, int64_t count, int64_t vocab_shard, int64_t vocab_begin,
                              int64_t first, BufferView stats) {
  const kernels::LogitStatsGrid grid = kernels::logit_stats_grid(count, vocab_shard, sms_);
  void* part = count > 0 ? scratch(logit_scratch_, kernels::logit_stats_scratch_bytes(count, grid), "CUDA logit_stats")
                         : nullptr;
  kernels::logit_stats(logits, count, vocab_shard, vocab_begin, first, stats, grid, part, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("logit_stats");
}

void CudaBackend::rmsnorm_heads(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim,
                                BufferView w, float eps) {
  kernels::rmsnorm_heads(x, rows, row_stride, heads, head_dim, w, eps, stream_);
  TPBATCH_CUDA_LAUNCHED("rmsnorm_heads");
}

void CudaBackend::gelu_tanh_mul(BufferView gu, BufferView out, int64_t m, int64_t inter) {
  kernels::gelu_tanh_mul(gu, out, m, inter, stream_);
  TPBATCH_CUDA_LAUNCHED("gelu_tanh_mul");
}

void CudaBackend::scale(BufferView x, size_t count, float factor) {
  kernels::scale(x, count, factor, stream_);
  TPBATCH_CUDA_LAUNCHED("scale");
}

void CudaBackend::softcap(BufferView x, size_t count, float cap) {
  kernels::softcap(x, count, cap, stream_);
  TPBATCH_CUDA_LAUNCHED("softcap");
}

// Mixture of experts: the slots and weights (host) go through one pinned buffer to the device;
// before it is refilled, the previous call's copy must have read it (moe_copied_).
void CudaBackend::weighted_row_sum(BufferView src, std::span<const int64_t> rows, std::span<const float> weights,
                                   int64_t k, int64_t width, BufferView out) {
  if (k <= 0 || rows.size() % static_cast<size_t>(k) != 0 || weights.size() != rows.size())
    throw Error("CUDA backend: weighted_row_sum: " + std::to_string(rows.size()) + " rows and " +
                std::to_string(weights.size()) + " weights are not m groups of k = " + std::to_string(k));
  if (rows.empty()) return;
  const size_t n = rows.size(), bytes = n * (sizeof(int32_t) + sizeof(float));
  if (!moe_copied_) TPBATCH_CUDA_CHECK(cudaEventCreateWithFlags(&moe_copied_, cudaEventDisableTiming));
  else wait_event(moe_copied_, "CUDA weighted_row_sum");
  ensure_pinned(moe_pinned_, moe_pinned_cap_, bytes);
  auto* h_rows = static_cast<int32_t*>(moe_pinned_);
  auto* h_weights = reinterpret_cast<float*>(h_rows + n);
  for (size_t i = 0; i < n; ++i) h_rows[i] = static_cast<int32_t>(rows[i]);
  std::copy(weights.begin(), weights.end(), h_weights);
  auto* d = static_cast<int32_t*>(scratch(moe_device_, bytes, "CUDA weighted_row_sum"));
  TPBATCH_CUDA_CHECK(cudaMemcpyAsync(d, h_rows, bytes, cudaMemcpyHostToDevice, stream_));
  TPBATCH_CUDA_CHECK(cudaEventRecord(moe_copied_, stream_));
  kernels::weighted_row_sum(src, d, reinterpret_cast<const float*>(d + n), static_cast<int64_t>(n) / k, k, width, out,
                            stream_);
  TPBATCH_CUDA_LAUNCHED("weighted_row_sum");
}

// The draw on the device, a bounded number of rows a launch (the sort's scratch is 16 bytes a
// vocabulary entry a row: 64 MiB for 32 rows at 128k). The host sends the rows and parameters
// (72 bytes a row) and gets 8 bytes a row back; a row the kernel leaves undecided (token -1: NaN
// logits, a cut in the tail, a sum too close to call) is downloaded and drawn by host_draw.
void CudaBackend::sample_rows(BufferView logits, int64_t vocab, std::span<const int64_t> rows,
                              std::span<const DrawParams> params, std::span<const float> row_max,
                              const HostDraw& host_draw, std::span<DrawnToken> out) {
  constexpr size_t kRowsPerLaunch = 32;
  const size_t n = rows.size();
  if (params.size() != n || row_max.size() != n || out.size() != n)
    throw Error("CUDA backend: sample_rows: rows, params, row maxima and outputs differ in count");
  if (n == 0) return;
  const size_t in_bytes = n * (sizeof(DrawParams) + sizeof(int64_t)), out_bytes = n * sizeof(DrawnToken);
  wait_stream("CUDA sample_rows");  // the previous call's copies are done with the pinned buffer
  ensure_pinned(draw_pinned_, draw_pinned_cap_, in_bytes + out_bytes);
  auto* h_params = static_cast<DrawParams*>(draw_pinned_);
  auto* h_rows = reinterpret_cast<int64_t*>(h_params + n);
  auto* h_out = reinterpret_cast<DrawnToken*>(h_rows + n);
  std::copy(params.begin(), params.end(), h_params);
  std::copy(rows.begin(), rows.end(), h_rows);
  auto* d_params = static_cast<DrawParams*>(scratch(draw_device_, in_bytes + out_bytes, "CUDA sample_rows"));
  auto* d_rows = reinterpret_cast<int64_t*>(d_params + n);
  auto* d_out = reinterpret_cast<DrawnToken*>(d_rows + n);
  TPBATCH_CUDA_CHECK(cudaMemcpyAsync(d_params, h_params, in_bytes, cudaMemcpyHostToDevice, stream_));
  for (size_t c = 0; c < n; c += kRowsPerLaunch) {
    const int64_t count = static_cast<int64_t>(std::min(kRowsPerLaunch, n - c));
    void* sort = scratch(draw_sort_, kernels::sample_rows_scratch_bytes(count, vocab), "CUDA sample_rows");
    kernels::sample_rows(logits, vocab, d_rows + c, d_params + c, count, sort, d_out + c, stream_);
    TPBATCH_CUDA_LAUNCHED("sample_rows");
  }
  TPBATCH_CUDA_CHECK(cudaMemcpyAsync(h_out, d_out, out_bytes, cudaMemcpyDeviceToHost, stream_));
  wait_stream("CUDA sample_rows");
  std::copy(h_out, h_out + n, out.begin());
  std::vector<float> row;
  for (size_t i = 0; i < n; ++i) {
    if (out[i].token >= 0) continue;
    row.resize(static_cast<size_t>(vocab));
    download(logits.at(rows[i] * vocab), row.data(), row.size() * sizeof(float));
    const int32_t t = host_draw(row.data(), vocab, params[i], row_max[i]);
    out[i] = DrawnToken{t, row[static_cast<size_t>(t)]};
  }
}

}  // namespace tpbatch
