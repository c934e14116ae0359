// The CUDA backend: cuBLAS GEMMs (bf16/fp16 with fp32 accumulation, TF32 for fp32 weights) for
// matmul_nt, kernels/ for everything else, all on one stream. Same contract as the CPU backend
// (the reference, src/backend/cpu/), which tests/gpu/test_cuda_kernels.cpp compares it with.
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "common/log.h"
#include "reliability/watchdog.h"

namespace tpbatch {
namespace {

constexpr size_t kUploadChunk = size_t(16) << 20;   // pinned bytes per upload chunk (two of them)
constexpr size_t kDownloadChunk = size_t(64) << 20;  // largest pinned stage a download grows to

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::F32: return CUDA_R_32F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F16: return CUDA_R_16F;
    default: throw Error(std::string("CUDA backend: matmul_nt: dtype ") + dtype_name(t) + " is not a GEMM type");
  }
}

// 16-byte aligned offsets (in int32 elements) of the sections of the step buffer.
size_t align4(size_t ints) { return (ints + 3) / 4 * 4; }

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
  TPBATCH_CUDA_CHECK(cudaSetDevice(device));
  TPBATCH_CUDA_CHECK(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
  // Non-blocking: never implicitly ordered with the legacy default stream (other libraries' work).
  TPBATCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TPBATCH_CUBLAS_CHECK(cublasCreate(&cublas_));
  TPBATCH_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  TPBATCH_CUDA_CHECK(cudaEventCreateWithFlags(&wait_event_, cudaEventDisableTiming));
  for (int i = 0; i < 2; ++i) {
    TPBATCH_CUDA_CHECK(cudaEventCreateWithFlags(&step_copied_[i], cudaEventDisableTiming));
    TPBATCH_CUDA_CHECK(cudaEventCreateWithFlags(&upload_copied_[i], cudaEventDisableTiming));
  }
}

CudaBackend::~CudaBackend() {
  // After an abort the stream may hold work that never ends: leave everything to the exit. So
  // also when the last wait fails (it marks the backend aborted); a destructor throws nothing.
  if (aborted_) return;
  try {
    wait_stream("CUDA backend teardown");
  } catch (const std::exception& e) {
    mark_aborted(e.what());
    log_info("CUDA backend teardown on device %d: %s; its memory is left to the process exit",
                 device_, e.what());
    return;
  }
  for (Scratch* s : {&step_device_, &attention_scratch_, &logit_scratch_, &gemm_x_, &gemm_y_, &moe_device_,
                     &draw_device_, &draw_sort_})
    cudaFree(s->data);
  cudaFreeHost(moe_pinned_);
  cudaFreeHost(draw_pinned_);
  if (moe_copied_) cudaEventDestroy(moe_copied_);
  for (int i = 0; i < 2; ++i) {
    cudaFreeHost(step_pinned_[i]);
    cudaFreeHost(upload_pinned_[i]);
    cudaEventDestroy(step_copied_[i]);
    cudaEventDestroy(upload_copied_[i]);
  }
  cudaFreeHost(stage_);
  cudaEventDestroy(wait_event_);
  cublasDestroy(cublas_);
  cudaStreamDestroy(stream_);
}

// ---- waits ------------------------------------------------------------------------------------

void CudaBackend::add_error_source(AsyncErrorSource* source) { sources_.push_back(source); }
void CudaBackend::remove_error_source(AsyncErrorSource* source) { std::erase(sources_, source); }

void CudaBackend::mark_aborted(const std::string& why) noexcept {
  bool expected = false;
  if (!aborted_.compare_exchange_strong(expected, true)) return;  // the first reason is the one to report
  try {
    abort_reason_ = why;
  } catch (...) {  // out of memory for the message: the flag alone still stops waits and frees
  }
}

void CudaBackend::wait_event(cudaEvent_t event, const char* what) {
  if (aborted_) throw Error(std::string(what) + ": the CUDA backend was aborted earlier: " + abort_reason_);
  WatchedCall watched(what);
  if (sources_.empty()) {
    TPBATCH_CUDA_CHECK(cudaEventSynchronize(event));
    return;
  }
  try {
    wait_watching(
        [&] {
          const cudaError_t e = cudaEventQuery(event);
          if (e == cudaErrorNotReady) return false;
          cuda_check(e, what);
          return true;
        },
        sources_, what);
  } catch (const std::exception& e) {
    mark_aborted(e.what());  // conservatively: the error may have come from an aborted communicator too
    throw;
  }
}

void CudaBackend::wait_stream(const char* what) {
  TPBATCH_CUDA_CHECK(cudaEventRecord(wait_event_, stream_));
  wait_event(wait_event_, what);
}

void CudaBackend::synchronize() { wait_stream("CUDA synchronize"); }

// ---- memory -----------------------------------------------------------------------------------

Buffer CudaBackend::alloc(size_t count, DType dtype) {
  const size_t bytes = count * dtype_size(dtype);
  if (bytes == 0) return Buffer(this, nullptr, 0, dtype);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw Error("CUDA backend: cannot allocate " + std::to_string(bytes) + " bytes of device memory on " + name() +
                " (" + std::to_string(free >> 20) + " MiB free of " + std::to_string(total >> 20) +
                " MiB): " + cudaGetErrorString(e));
  }
  TPBATCH_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_));
  return Buffer(this, p, count, dtype);
}

// Called from Buffer destructors, also inside a step (a buffer replaced by a larger one) and while
// unwinding: it must neither throw nor hang. Queued work may still read the block, so it waits
// for the stream, but through the watched wait: a peer that died mid-step aborts the
// communicators instead of hanging here. When the wait fails the block is left to the process
// exit (a kernel may still touch it) and the backend is marked aborted, so the step's next wait
// throws with the reason.
void CudaBackend::release(void* data, size_t /*bytes*/) noexcept {
  if (!data || aborted_) return;
  try {
    wait_stream("CUDA free");
  } catch (const std::exception& e) {
    mark_aborted(e.what());
    log_info("CUDA free on device %d: %s; the block is left to the process exit", device_,
                 e.what());
    return;
  }
  cudaFree(data);
}

void CudaBackend::ensure_pinned(void*& buffer, size_t& cap, size_t bytes) {
  if (bytes <= cap) return;
  const size_t want = std::max(bytes, 2 * cap);
  // Callers made sure no copy still reads the old buffer, but cudaFreeHost (like cudaFree) waits
  // for the whole device, which behind an NCCL kernel whose peer died never returns: drain the
  // stream with the watched wait first (growth is rare, the wait cheap).
  if (buffer) {
    wait_stream("CUDA pinned buffer growth");
    TPBATCH_CUDA_CHECK(cudaFreeHost(buffer));
  }
  buffer = nullptr;
  cap = 0;
  TPBATCH_CUDA_CHECK(cudaMallocHost(&buffer, want));
  cap = want;
}

void CudaBackend::upload(BufferView dst, const void* src, size_t bytes) {
  const char* from = static_cast<const char*>(src);
  char* to = static_cast<char*>(dst.data);
  for (size_t off = 0; off < bytes; off += kUploadChunk) {
    const size_t n = std::min(kUploadChunk, bytes - off);
    const int i = upload_parity_;
    upload_parity_ ^= 1;
    if (!upload_pinned_[i]) TPBATCH_CUDA_CHECK(cudaMallocHost(&upload_pinned_[i], kUploadChunk));
    wait_event(upload_copied_[i], "CUDA upload");  // this chunk's previous copy has been read
    std::memcpy(upload_pinned_[i], from + off, n);
    TPBATCH_CUDA_CHECK(cudaMemcpyAsync(to + off, upload_pinned_[i], n, cudaMemcpyHostToDevice, stream_));
    TPBATCH_CUDA_CHECK(cudaEventRecord(upload_copied_[i], stream_));
  }
}

void CudaBackend::download(BufferView src, void* dst, size_t bytes) {
  const char* from = static_cast<const char*>(src.data);
  char* to = static_cast<char*>(dst);
  if (bytes == 0) {
    wait_stream("CUDA download");
    return;
  }
  size_t cap = stage_cap_;
  ensure_pinned(stage_, cap, std::min(bytes, kDownloadChunk));
  stage_cap_ = cap;
  const size_t chunk = std::max(stage_cap_, std::min(bytes, kDownloadChunk));
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    TPBATCH_CUDA_CHECK(cudaMemcpyAsync(stage_, from + off, n, cudaMemcpyDeviceToHost, stream_));
    wait_stream("CUDA download");
    std::memcpy(to + off, stage_, n);
  }
}

void CudaBackend::host_access(BufferView view, size_t bytes, bool write, const std::function<void(void*)>& fn) {
  if (bytes == 0) {
    fn(nullptr);
    return;
  }
  size_t cap = stage_cap_;
  ensure_pinned(stage_, cap, bytes);
  stage_cap_ = cap;
  TPBATCH_CUDA_CHECK(cudaMemcpyAsync(stage_, view.data, bytes, cudaMemcpyDeviceToHost, stream_));
  wait_stream("CUDA host access");
  fn(stage_);
  if (write) {
    TPBATCH_CUDA_CHECK(cudaMemcpyAsync(view.data, stage_, bytes, cudaMemcpyHostToDevice, stream_));
    wait_stream("CUDA host access");  // the stage is reused by the next call
  }
}

size_t CudaBackend::memory_available() const {
  size_t free = 0, total = 0;
  TPBATCH_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return free;
}

void* CudaBackend::scratch(Scratch& s, size_t bytes, const char* what) {
  if (bytes <= s.bytes) return s.data;
  // The old block may still be read by queued kernels, and cudaFree waits for the whole device:
  // the watched wait drains the stream first, or aborts on a dead peer instead of hanging.
  if (s.data) {
    wait_stream(what);
    TPBATCH_CUDA_CHECK(cudaFree(s.data));
    s.data = nullptr;
  }
  const size_t want = std::max(bytes, 2 * s.bytes);
  s.bytes = 0;
  TPBATCH_CUDA_CHECK(cudaMalloc(&s.data, want));
  s.bytes = want;
  return s.data;
}

// ---- the step ---------------------------------------------------------------------------------

void CudaBackend::begin_step(const StepBatch& step) {
  const size_t rows = std::max(step.tokens.size(), step.positions.size());
  const size_t num_seqs = step.seqs.size(), num_logit = step.logit_rows.size();
  size_t table_ints = 0;
  for (const AttentionSeq& s : step.seqs) {
    if (s.row_begin < 0 || s.num_rows < 0 || static_cast<size_t>(s.row_begin + s.num_rows) > rows)
      throw Error("CUDA backend: begin_step: sequence rows [" + std::to_string(s.row_begin) + ", " +
                  std::to_string(s.row_begin + s.num_rows) + ") outside the step's " + std::to_string(rows) + " rows");
    table_ints += static_cast<size_t>(s.num_blocks);
  }
  if (!step.rope_tables.empty() && step.rope_tables.size() != rows)
    throw Error("CUDA backend: begin_step: " + std::to_string(step.rope_tables.size()) + " rope tables for " +
                std::to_string(rows) + " rows");
  for (int64_t r : step.logit_rows)
    if (r < 0 || static_cast<size_t>(r) >= rows)
      throw Error("CUDA backend: begin_step: logit row " + std::to_string(r) + " outside the step's " +
                  std::to_string(rows) + " rows");

  // Section offsets in int32 elements.
  const size_t o_tokens = 0;
  const size_t o_positions = o_tokens + align4(rows);
  const bool rope_tables = !step.rope_tables.empty();
  const size_t o_rope_tables = o_positions + align4(rows);
  const size_t o_attn = o_rope_tables + (rope_tables ? align4(rows) : 0);
  const size_t o_tables = o_attn + align4(3 * rows);
  const size_t o_row_begin = o_tables + align4(std::max<size_t>(table_ints, 1));
  const size_t o_num_rows = o_row_begin + align4(num_seqs);
  const size_t o_prefix = o_num_rows + align4(num_seqs);
  const size_t o_logit_rows = o_prefix + align4(kernels::kTileShapes * (num_seqs + 1));
  const size_t o_targets = o_logit_rows + align4(num_logit);
  const size_t total = o_targets + align4(num_logit);
  const size_t bytes = total * sizeof(int32_t);

  // The pinned buffer of two steps ago may still be in its copy: wait for that copy only.
  const int i = step_parity_;
  step_parity_ ^= 1;
  wait_event(step_copied_[i], "CUDA begin_step");
  ensure_pinned(step_pinned_[i], step_pinned_cap_[i], bytes);
  auto* h = static_cast<int32_t*>(step_pinned_[i]);
  std::memset(h, 0, bytes);

  for (size_t r = 0; r < step.tokens.size(); ++r) h[o_tokens + r] = step.tokens[r];
  for (size_t r = 0; r < step.positions.size(); ++r) h[o_positions + r] = step.positions[r];
  for (size_t r = 0; r < step.rope_tables.size(); ++r) h[o_rope_tables + r] = step.rope_tables[r];
  auto* attn = reinterpret_cast<kernels::AttentionRow*>(h + o_attn);
  for (size_t r = 0; r < rows; ++r) attn[r] = {-1, 0, 0};
  int32_t* tables = h + o_tables;
  int32_t table_off = 0;
  step_seqs_.assign(step.seqs.begin(), step.seqs.end());
  for (int s = 0; s < kernels::kTileShapes; ++s) {
    h[o_prefix + s * (num_seqs + 1)] = 0;
    tiles_by_shape_[s] = 0;
  }
  for (size_t si = 0; si < num_seqs; ++si) {
    const AttentionSeq& s = step.seqs[si];
    std::copy(s.blocks, s.blocks + s.num_blocks, tables + table_off);
    for (int64_t r = 0; r < s.num_rows; ++r)
      attn[s.row_begin + r] = {static_cast<int32_t>(s.pos_begin + r), table_off, static_cast<int32_t>(s.num_blocks)};
    table_off += static_cast<int32_t>(s.num_blocks);
    h[o_row_begin + si] = static_cast<int32_t>(s.row_begin);
    h[o_num_rows + si] = static_cast<int32_t>(s.num_rows);
    for (int shape = 0; shape < kernels::kTileShapes; ++shape) {
      const int64_t per_tile = int64_t(1) << shape;
      tiles_by_shape_[shape] += (s.num_rows + per_tile - 1) / per_tile;
      h[o_prefix + shape * (num_seqs + 1) + si + 1] = static_cast<int32_t>(tiles_by_shape_[shape]);
    }
    step_seqs_[si].blocks = nullptr;
  }
  for (size_t j = 0; j < num_logit; ++j) {
    h[o_logit_rows + j] = static_cast<int32_t>(step.logit_rows[j]);
    h[o_targets + j] = j < step.logit_targets.size() ? step.logit_targets[j] : -1;
  }

  auto* d = static_cast<int32_t*>(scratch(step_device_, bytes, "CUDA begin_step"));
  TPBATCH_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, stream_));
  TPBATCH_CUDA_CHECK(cudaEventRecord(step_copied_[i], stream_));

  step_.rows = static_cast<int64_t>(rows);
  step_.num_seqs = static_cast<int64_t>(num_seqs);
  step_.num_logit_rows = static_cast<int64_t>(num_logit);
  step_.tokens = d + o_tokens;
  step_.positions = d + o_positions;
  step_.rope_tables = rope_tables ? d + o_rope_tables : nullptr;
  step_.attn_rows = reinterpret_cast<const kernels::AttentionRow*>(d + o_attn);
  step_.tables = d + o_tables;
  step_.seq_row_begin = d + o_row_begin;
  step_.seq_num_rows = d + o_num_rows;
  step_.tile_prefix = d + o_prefix;
  step_.logit_rows = d + o_logit_rows;
  step_.logit_targets = d + o_targets;
}

// ---- compute ----------------------------------------------------------------------------------

void CudaBackend::matmul_nt(BufferView x, BufferView w, BufferView y, int64_t m, int64_t n, int64_t k) {
  if (m == 0 || n == 0) return;
  // cuBLAS takes both operands in one type: the weight's. Activations of another dtype are
  // converted first (F32 weights of a `dtype: float32` job with bf16 activations: to F32, then
  // TF32 tensor cores). The output goes straight to y when cuBLAS can write y's dtype, else
  // through F32 scratch.
  const DType ab = w.dtype;
  const cudaDataType_t ab_type = cuda_type(ab);
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
  const cublasComputeType_t compute = ab == DType::F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.0f, zero = 0.0f;
  // Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T (n x m) = w (k x n)^T · x^T (k x m).
  TPBATCH_CUBLAS_CHECK(cublasGemmEx(cublas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                    static_cast<int>(k), &one, w.data, ab_type, static_cast<int>(k), xb.data, ab_type,
                                    static_cast<int>(k), &zero, yc.data, cuda_type(yc.dtype), static_cast<int>(n),
                                    compute, CUBLAS_GEMM_DEFAULT));
  if (!direct) {
    kernels::convert(yc, y, static_cast<size_t>(m * n), stream_);
    TPBATCH_CUDA_LAUNCHED("convert (matmul_nt output)");
  }
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

void CudaBackend::paged_attention(BufferView q, int64_t q_stride, BufferView k, BufferView v, int64_t kv_stride,
                                  BufferView k_cache, BufferView v_cache, const KvLayout& kv, int64_t q_heads,
                                  BufferView out) {
  if (kv.kv_heads <= 0 || q_heads % kv.kv_heads != 0)
    throw Error("CUDA backend: paged_attention: " + std::to_string(q_heads) + " q heads are not a multiple of " +
                std::to_string(kv.kv_heads) + " kv heads");
  int64_t max_span = 0;
  for (const AttentionSeq& s : step_seqs_) {
    if (s.num_rows == 0) continue;
    const int64_t end = s.pos_begin + s.num_rows;  // positions 0..end-1 are visible to the last row
    if ((end - 1) / kv.block_size >= s.num_blocks)
      throw Error("CUDA backend: paged_attention: a sequence reaching position " + std::to_string(end - 1) +
                  " has only " + std::to_string(s.num_blocks) + " KV blocks of " + std::to_string(kv.block_size));
    const int64_t span = kv.window > 0 ? std::min(end, kv.window + kernels::kMaxTileQueries) : end;
    max_span = std::max(max_span, span);
  }
  kernels::kv_append(k, v, kv_stride, k_cache, v_cache, kv, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("kv_append");
  const kernels::AttentionGrid grid =
      kernels::attention_grid(q_heads / kv.kv_heads, kv.kv_heads, tiles_by_shape_, max_span, sms_);
  const size_t floats = kernels::attention_scratch_floats(step_.rows, q_heads, kv.head_dim, grid.splits);
  float* part = floats ? static_cast<float*>(scratch(attention_scratch_, floats * sizeof(float), "CUDA attention"))
                       : nullptr;
  kernels::paged_attention(q, q_stride, k_cache, v_cache, kv, q_heads, out, grid, part, step_, stream_);
  TPBATCH_CUDA_LAUNCHED("paged_attention");
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

// ---- factory and queries ------------------------------------------------------------------------

std::unique_ptr<Backend> make_cuda_backend(int device) { return std::make_unique<CudaBackend>(device); }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the "no driver"/"no device" error
    return 0;
  }
  return n;
}

std::string cuda_device_description(int device) {
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f", prop.totalGlobalMem / double(size_t(1) << 30));
  return std::string(prop.name) + ", " + gib + " GiB, " + std::to_string(prop.multiProcessorCount) + " SMs";
}

std::string cuda_device_bus_id(int device) {
  char id[64] = {};
  if (cudaDeviceGetPCIBusId(id, static_cast<int>(sizeof id), device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

std::string cuda_build_info() {
  int rt = 0, nccl = 0;
  cudaRuntimeGetVersion(&rt);
  ncclGetVersion(&nccl);
  const int nccl_major = nccl / 10000, nccl_minor = nccl % 10000 / 100, nccl_patch = nccl % 100;
  return "CUDA runtime " + std::to_string(rt / 1000) + "." + std::to_string(rt % 1000 / 10) + ", NCCL " +
         std::to_string(nccl_major) + "." + std::to_string(nccl_minor) + "." + std::to_string(nccl_patch);
}

}  // namespace tpbatch
