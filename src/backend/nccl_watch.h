#pragma once
// Waiting for device work without hanging on a dead peer. A host wait on the CUDA backend's
// stream may sit behind NCCL kernels whose peer has died: they never finish, and a plain
// cudaStreamSynchronize would hang until the watchdog kills the rank. So the backend waits by
// polling, and between polls asks every communicator on its stream for an asynchronous error
// (ncclCommGetAsyncError); on one it aborts them all (ncclCommAbort, which also ends their
// pending kernels) and throws, so the rank exits with the error and the job ends.
//
// Compiled in every build (no CUDA here): tests/unit/test_nccl_watch.cpp drives it with fakes.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace tpbatch {

// Something on the stream that can fail asynchronously while the host waits: an NCCL communicator.
class AsyncErrorSource {
 public:
  virtual ~AsyncErrorSource() = default;
  virtual std::string source_name() const = 0;
  // Empty while healthy, else what went wrong (e.g. "remote process exited or there was a network error").
  virtual std::string poll_async_error() = 0;
  // Ends the source's pending work so that the stream can drain; the source is unusable after.
  virtual void abort() noexcept = 0;
};

// Returns once done() is true. Between calls to done() (which may throw, e.g. on a CUDA error)
// polls every source; when one reports an error, aborts every source and throws Error:
// "<what>: <source>: <error> (communicators aborted)". poll_interval: the pause between polls
// after the first few (short waits stay spin-fast).
void wait_watching(const std::function<bool()>& done, const std::vector<AsyncErrorSource*>& sources,
                   const std::string& what,
                   std::chrono::microseconds poll_interval = std::chrono::microseconds(50));

}  // namespace tpbatch
