#pragma once
// The CUDA backend's class, for the files of src/backend/cuda/ (the NCCL communicator needs its
// stream and its host waits). Everyone else uses cuda_backend.h.
//
// How the Backend contract maps to CUDA:
// - Memory: cudaMalloc'd Buffers, zero-filled on the stream. upload() goes through two pinned
//   chunks (the source may be reused at once); download() and host_access() through a pinned
//   stage buffer; memory_available() is cudaMemGetInfo's free bytes.
// - One non-blocking stream per backend; every operation, copy and NCCL call is queued on it in
//   order, so nothing but the host waits synchronise.
// - begin_step() packs the step's ids, positions, per-row attention table, block tables, tile
//   index and logit requests into one pinned buffer and sends it with one cudaMemcpyAsync.
//   Two pinned buffers alternate, each reused only after an event says its last copy is done.
// - Host waits poll cudaEventQuery and the registered AsyncErrorSources (nccl_watch.h), the waits
//   before every free included (cudaFree/cudaFreeHost wait for the whole device). release() and
//   the destructors cannot throw: when their wait fails they mark the backend aborted and leave
//   the memory to the process exit.
// Where: lifetime, waits and device queries in cuda_backend.cpp; memory in cuda_memory.cpp; the
// step buffer and attention in cuda_step.cpp; quantized weights in cuda_quantized.cpp; the other
// operations in cuda_ops.cpp.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <vector>

#include "backend/backend.h"
#include "backend/nccl_watch.h"
#include "kernels.h"

namespace tpbatch {

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda:" + std::to_string(device_); }
  DType activation_dtype() const override { return DType::BF16; }

  Buffer alloc(size_t count, DType dtype) override;
  void upload(BufferView dst, const void* src, size_t bytes) override;
  void download(BufferView src, void* dst, size_t bytes) override;
  void synchronize() override;
  void host_access(BufferView view, size_t bytes, bool write, const std::function<void(void*)>& fn) override;
  size_t memory_available() const override;

  void begin_step(const StepBatch& step) override;

  void matmul_nt(BufferView x, BufferView w, BufferView y, int64_t m, int64_t n, int64_t k) override;
  bool runs_quantized_weights(DType values) const override {
    return values == DType::F8E4M3 || values == DType::I4 || values == DType::I8;
  }
  void matmul_nt_scaled(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n,
                        int64_t k) override;
  void int8_row_amax(BufferView x, BufferView amax, int64_t m, int64_t k) override;
  void add_bias(BufferView x, BufferView bias, int64_t m, int64_t n) override;
  void add(BufferView x, BufferView y, size_t count) override;
  void rmsnorm(BufferView x, BufferView w, BufferView out, int64_t m, int64_t n, float eps) override;
  void add_rmsnorm(BufferView x, BufferView residual, BufferView w, BufferView out, int64_t m, int64_t n,
                   float eps) override;
  void rope(BufferView x, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView inv_freq) override;
  void silu_mul(BufferView gu, BufferView out, int64_t m, int64_t inter) override;
  void paged_attention(BufferView q, int64_t q_stride, BufferView k, BufferView v, int64_t kv_stride,
                       BufferView k_cache, BufferView v_cache, const KvLayout& kv, int64_t q_heads,
                       BufferView out) override;
  void embedding(BufferView table, int64_t vocab_begin, int64_t vocab_end, int64_t dim, BufferView out) override;
  void gather_logit_rows(BufferView x, int64_t dim, int64_t first, int64_t count, BufferView out) override;
  void copy_rows(BufferView src, int64_t src_stride, std::span<const int64_t> rows, int64_t width, BufferView dst,
                 int64_t dst_stride) override;
  void logit_stats(BufferView logits, int64_t count, int64_t vocab_shard, int64_t vocab_begin, int64_t first,
                   BufferView stats) override;
  void sample_rows(BufferView logits, int64_t vocab, std::span<const int64_t> rows, std::span<const DrawParams> params,
                   std::span<const float> row_max, const HostDraw& host_draw, std::span<DrawnToken> out) override;
  void rmsnorm_heads(BufferView x, int64_t rows, int64_t row_stride, int64_t heads, int64_t head_dim, BufferView w,
                     float eps) override;
  void gelu_tanh_mul(BufferView gu, BufferView out, int64_t m, int64_t inter) override;
  void scale(BufferView x, size_t count, float factor) override;
  void softcap(BufferView x, size_t count, float cap) override;
  void mask_logits(BufferView logits, int64_t rows, int64_t vocab_shard, BufferView bits) override;
  void weighted_row_sum(BufferView src, std::span<const int64_t> rows, std::span<const float> weights, int64_t k,
                        int64_t width, BufferView out) override;

  // ---- for the NCCL communicator ----
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Sources polled during host waits (not owned; remove before destroying one).
  void add_error_source(AsyncErrorSource* source);
  void remove_error_source(AsyncErrorSource* source);
  // Waits for everything queued so far, polling the error sources.
  void wait_stream(const char* what);
  // After an abort (an NCCL error, or a failed wait) the stream may never drain: destructors
  // then skip their waits and frees, and every later wait throws.
  bool aborted() const { return aborted_; }

 protected:
  void release(void* data, size_t bytes) noexcept override;

 private:
  // Grow-only device scratch; growing waits for the stream (the old block may still be read).
  struct Scratch {
    void* data = nullptr;
    size_t bytes = 0;
  };
  // Grows to twice the old size at least (few regrowths), or with `exact` to `bytes` alone (the
  // dequantize scratch, which `plan` counts at its largest need).
  void* scratch(Scratch& s, size_t bytes, const char* what, bool exact = false);
  // y (row stride ldy >= n) = x · wᵀ by cuBLAS, x and w both in w's GEMM dtype, y F32 or w's dtype.
  void cublas_nt(BufferView x, BufferView w, BufferView y, int64_t m, int64_t n, int64_t k, int64_t ldy);
  // matmul_nt_scaled for I8 (W8A8) weights: x quantized per row, then int32 products.
  void matmul_nt_int8(BufferView x, const ScaledWeightView& w, BufferView y, int64_t m, int64_t n, int64_t k);
  void wait_event(cudaEvent_t event, const char* what);
  void mark_aborted(const std::string& why) noexcept;  // the first call's reason is kept
  void ensure_pinned(void*& buffer, size_t& cap, size_t bytes);

  int device_;
  int sms_ = 1;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cudaEvent_t wait_event_ = nullptr;
  std::vector<AsyncErrorSource*> sources_;
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;  // written once, by the call that sets aborted_

  // begin_step(): two pinned host buffers in turn, one device buffer, and what the host keeps.
  void* step_pinned_[2] = {nullptr, nullptr};
  size_t step_pinned_cap_[2] = {0, 0};
  cudaEvent_t step_copied_[2] = {nullptr, nullptr};
  int step_parity_ = 0;
  Scratch step_device_;
  kernels::StepView step_;
  std::vector<AttentionSeq> step_seqs_;       // blocks pointers not kept (host memory of the caller)
  int64_t tiles_by_shape_[kernels::kTileShapes] = {};

  // upload(): two pinned chunks in turn.
  void* upload_pinned_[2] = {nullptr, nullptr};
  cudaEvent_t upload_copied_[2] = {nullptr, nullptr};
  int upload_parity_ = 0;

  // download() / host_access(): one pinned stage.
  void* stage_ = nullptr;
  size_t stage_cap_ = 0;

  Scratch attention_scratch_, logit_scratch_, gemm_x_, gemm_y_;
  Scratch dequantized_;  // matmul_nt_scaled's BF16 slice of weights (backend/dequantize_slices.h)
  Scratch int8_x_;       // matmul_nt_scaled's x quantized to int8 for I8 weights, then its row scales

  // weighted_row_sum(): the slots and weights of the MoE combine, pinned then on the device.
  void* moe_pinned_ = nullptr;
  size_t moe_pinned_cap_ = 0;
  cudaEvent_t moe_copied_ = nullptr;
  Scratch moe_device_;

  // sample_rows(): rows, params and tokens through one pinned buffer and one device buffer; the
  // sort's keys and probabilities in their own scratch.
  void* draw_pinned_ = nullptr;
  size_t draw_pinned_cap_ = 0;
  Scratch draw_device_, draw_sort_;
};

}  // namespace tpbatch
