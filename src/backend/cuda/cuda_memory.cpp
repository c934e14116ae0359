// The CUDA backend's memory: device buffers, the pinned staging of uploads and downloads, and
// grow-only scratch. All copies are queued on the backend's one stream.
#include <algorithm>
#include <cstring>
#include <string>

#include "backend/cuda/cuda_backend_impl.h"
#include "backend/cuda/cuda_check.h"
#include "common/error.h"
#include "common/log.h"

namespace tpbatch {
namespace {

constexpr size_t kUploadChunk = size_t(16) << 20;   // pinned bytes per upload chunk (two of them)
constexpr size_t kDownloadChunk = size_t(64) << 20;  // largest pinned stage a download grows to

}  // namespace

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

void* CudaBackend::scratch(Scratch& s, size_t bytes, const char* what, bool exact) {
  if (bytes <= s.bytes) return s.data;
  // The old block may still be read by queued kernels, and cudaFree waits for the whole device:
  // the watched wait drains the stream first, or aborts on a dead peer instead of hanging.
  if (s.data) {
    wait_stream(what);
    TPBATCH_CUDA_CHECK(cudaFree(s.data));
    s.data = nullptr;
  }
  const size_t want = exact ? bytes : std::max(bytes, 2 * s.bytes);
  s.bytes = 0;
  TPBATCH_CUDA_CHECK(cudaMalloc(&s.data, want));
  s.bytes = want;
  return s.data;
}

}  // namespace tpbatch
