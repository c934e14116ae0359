#pragma once
// The emulator's host side, shared by its files: the allocation table, the streams and events,
// the sticky error. One lock guards it all (the emulator is for correctness, not speed); a
// function whose name ends in _locked expects the caller to hold it.
#include <cuda_runtime_api.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace cuemu {

std::mutex& state_mutex();
using Lock = std::unique_lock<std::mutex>;
inline Lock lock_state() { return Lock(state_mutex()); }

// "cuemu: ..." on stderr: what real CUDA would only have answered with an error code.
void complain(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// Records e as the sticky last error (unless success) and returns it.
cudaError_t set_error_locked(cudaError_t e);

// ---- memory ------------------------------------------------------------------------------------
enum class Mem { Device, Pinned };
// Whether [p, p + bytes) lies inside one live allocation of `kind`; otherwise *why says why.
bool in_alloc_locked(const void* p, size_t bytes, Mem kind, std::string* why);
bool is_device_locked(const void* p);
bool is_pinned_locked(const void* p);

// ---- streams -----------------------------------------------------------------------------------
// CUEMU_MODE:
//   lazy     queued work runs only when the host must see it (a synchronize, the second poll of a
//            pending event, a copy into pageable memory, a free): a missing wait shows up on every
//            run as wrong data, where on a GPU it shows only when the timing is unlucky.
//   threaded a worker thread per stream runs its work at once, after a random delay of up to
//            CUEMU_JITTER_US (default 50) microseconds: host/device races and the progress of
//            MPI beside NCCL behave as on a GPU (no false deadlocks between ranks).
//   eager    every operation runs when it is queued, on the caller's thread.
// Default: threaded under a multi-rank launcher (OMPI_COMM_WORLD_SIZE, PMI_SIZE > 1), else lazy.
enum class Mode { Lazy, Threaded, Eager };
Mode mode();

struct Stream;
// The stream a handle names (0 and the legacy/per-thread handles: the legacy stream); null with
// *err set when the handle is unknown or destroyed.
Stream* stream_of_locked(cudaStream_t s, cudaError_t* err);
// Queues fn; in eager mode runs it (and everything before it) at once.
void enqueue_locked(Lock& lk, Stream* s, std::string what, std::function<void()> fn);
// Operations queued so far on s (an event recorded now waits for this many).
uint64_t queued_locked(const Stream* s);
// Waits until s has run its first `seq` operations (lazy: runs them here). False when a stuck
// operation (a failed NCCL call) stops the stream first.
bool run_until_locked(Lock& lk, Stream* s, uint64_t seq);
bool done_locked(const Stream* s, uint64_t seq);
// A host wait that real CUDA would never return from (the stream is stuck) ends the process with
// the reason.
void must_finish_locked(Lock& lk, Stream* s, uint64_t seq, const char* api);
void drain_locked(Lock& lk, Stream* s, const char* api);
void drain_all_locked(Lock& lk, const char* api);

// ---- for the cuBLAS and NCCL stand-ins -----------------------------------------------------------
bool enqueue_on(cudaStream_t s, std::string what, std::function<void()> fn);
bool device_range(const void* p, size_t bytes, std::string* why);
// Called by the running operation: it will never complete (until unstick(), NCCL's abort).
void hang_current_op(const std::string& why);
void unstick_current_op();
void unstick(cudaStream_t s);

}  // namespace cuemu
