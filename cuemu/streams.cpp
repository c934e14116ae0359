// Streams and events (see host_state.h for the three modes). Each stream is a queue of host
// closures: kernel grids, copies, cuBLAS and NCCL operations. An NCCL operation that fails (a
// peer died or aborted) leaves its stream stuck, as a failed NCCL kernel does, until the
// communicator is aborted.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <memory>
#include <random>
#include <set>

#include "host_state.h"

namespace cuemu {

struct Op {
  std::function<void()> fn;
  std::string what;
};
struct Stream {
  std::deque<Op> q;
  uint64_t queued = 0, done = 0;
  unsigned flags = 0;
  std::string stuck;     // why the operation at the front will never complete
  bool busy = false;     // an operation of this stream is running (with the lock released)
  std::thread worker;    // threaded mode
  bool stopping = false;
  unsigned index = 0;
};
struct Event {
  Stream* s = nullptr;
  uint64_t seq = 0;
  bool queried_pending = false;
  bool timing = true;  // not cudaEventDisableTiming: recording queues a marker that stamps the time
  std::shared_ptr<std::chrono::steady_clock::time_point> stamp = std::make_shared<std::chrono::steady_clock::time_point>();
};

namespace {

struct State {
  std::mutex mu;
  std::condition_variable progress;  // an operation completed, a stream got stuck or unstuck, work was queued
  std::set<Stream*> streams;
  std::set<Event*> events;
  Stream legacy;
  cudaError_t last_error = cudaSuccess;
  unsigned next_index = 0;
};
State& st() {
  static auto* s = new State();  // never destroyed: stream workers may outlive main
  return *s;
}

std::string env(const char* name, const char* dflt) {
  const char* v = std::getenv(name);
  return v && *v ? v : dflt;
}
bool under_multi_rank_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (std::atoi(env(v, "1").c_str()) > 1) return true;
  return false;
}
Mode mode_from_env() {
  const std::string m = env("CUEMU_MODE", "");
  if (m == "lazy") return Mode::Lazy;
  if (m == "threaded") return Mode::Threaded;
  if (m == "eager") return Mode::Eager;
  if (!m.empty()) std::fprintf(stderr, "cuemu: CUEMU_MODE=%s is not lazy, threaded or eager: using the default\n", m.c_str());
  return under_multi_rank_launcher() ? Mode::Threaded : Mode::Lazy;
}
const bool g_trace = env("CUEMU_TRACE", "0") != "0";
const int g_jitter_us = std::atoi(env("CUEMU_JITTER_US", "50").c_str());

thread_local Stream* t_running = nullptr;

// Runs the front operation of s with the lock released (it may wait for peers, or call back).
void run_front_locked(Lock& lk, Stream* s) {
  Op op = std::move(s->q.front());
  s->q.pop_front();
  s->busy = true;
  lk.unlock();
  if (g_trace) std::fprintf(stderr, "cuemu: run %s\n", op.what.c_str());
  t_running = s;
  op.fn();
  t_running = nullptr;
  lk.lock();
  s->busy = false;
  if (!s->stuck.empty()) s->q.push_front(Op{[] {}, "(the stuck operation, ended by its abort) " + op.what});
  else s->done++;
  st().progress.notify_all();
}

void worker_main(Stream* s) {
  std::minstd_rand rng(std::atoi(env("CUEMU_SEED", "1").c_str()) * 7919u + s->index);
  Lock lk = lock_state();
  for (;;) {
    st().progress.wait(lk, [&] { return s->stopping || (!s->q.empty() && s->stuck.empty()); });
    if (s->q.empty() || !s->stuck.empty()) return;  // stopping
    if (g_jitter_us > 0 && (rng() & 1)) {
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % (g_jitter_us + 1)));
      lk.lock();
      if (s->q.empty() || !s->stuck.empty()) continue;
    }
    run_front_locked(lk, s);
  }
}

Stream* new_stream_locked(unsigned flags) {
  auto* s = new Stream();
  s->flags = flags;
  s->index = st().next_index++;
  if (mode() == Mode::Threaded) s->worker = std::thread(worker_main, s);
  return s;
}

Stream& legacy_locked() {
  static Stream* s = [] {
    Stream* l = &st().legacy;
    l->index = st().next_index++;
    if (mode() == Mode::Threaded) l->worker = std::thread(worker_main, l);
    return l;
  }();
  return *s;
}

Event* event_of_locked(cudaEvent_t e) {
  auto* ev = reinterpret_cast<Event*>(e);
  if (!st().events.count(ev)) {
    complain("unknown or destroyed event %p", static_cast<void*>(e));
    return nullptr;
  }
  return ev;
}

}  // namespace

std::mutex& state_mutex() { return st().mu; }

Mode mode() {
  static const Mode m = mode_from_env();
  return m;
}

void complain(const char* fmt, ...) {
  std::fprintf(stderr, "cuemu: ");
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
}

cudaError_t set_error_locked(cudaError_t e) {
  if (e != cudaSuccess) st().last_error = e;
  return e;
}
namespace {
cudaError_t take_error_locked() {
  const cudaError_t e = st().last_error;
  st().last_error = cudaSuccess;
  return e;
}
cudaError_t peek_error_locked() { return st().last_error; }
}  // namespace

Stream* stream_of_locked(cudaStream_t s, cudaError_t* err) {
  if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &legacy_locked();
  auto* stream = reinterpret_cast<Stream*>(s);
  if (!st().streams.count(stream)) {
    complain("unknown or destroyed stream %p", static_cast<void*>(s));
    *err = cudaErrorInvalidResourceHandle;
    return nullptr;
  }
  return stream;
}

uint64_t queued_locked(const Stream* s) { return s->queued; }
bool done_locked(const Stream* s, uint64_t seq) { return s->done >= seq; }

bool run_until_locked(Lock& lk, Stream* s, uint64_t seq) {
  if (mode() == Mode::Threaded) {
    st().progress.wait(lk, [&] { return s->done >= seq || (!s->stuck.empty() && !s->busy); });
    return s->done >= seq;
  }
  while (s->done < seq) {
    if (!s->stuck.empty()) return false;
    if (s->busy) {  // another host thread is running this stream's front operation
      st().progress.wait(lk);
      continue;
    }
    run_front_locked(lk, s);
  }
  return true;
}

void must_finish_locked(Lock& lk, Stream* s, uint64_t seq, const char* api) {
  if (run_until_locked(lk, s, seq)) return;
  std::fprintf(stderr, "cuemu: %s waits for a stream stuck behind \"%s\": on a GPU this call never returns\n", api,
               s->stuck.c_str());
  std::abort();
}
void drain_locked(Lock& lk, Stream* s, const char* api) { must_finish_locked(lk, s, s->queued, api); }
void drain_all_locked(Lock& lk, const char* api) {
  drain_locked(lk, &legacy_locked(), api);
  for (Stream* s : std::set<Stream*>(st().streams)) drain_locked(lk, s, api);
}

void enqueue_locked(Lock& lk, Stream* s, std::string what, std::function<void()> fn) {
  // The legacy stream waits for every blocking stream's earlier work: let that finish first.
  if (s == &legacy_locked())
    for (Stream* o : std::set<Stream*>(st().streams))
      if (!(o->flags & cudaStreamNonBlocking)) drain_locked(lk, o, "an operation on the legacy stream");
  s->q.push_back(Op{std::move(fn), std::move(what)});
  s->queued++;
  if (mode() == Mode::Threaded) st().progress.notify_all();
  if (mode() == Mode::Eager) run_until_locked(lk, s, s->queued);
}

bool enqueue_on(cudaStream_t s, std::string what, std::function<void()> fn) {
  Lock lk = lock_state();
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!stream) return false;
  enqueue_locked(lk, stream, std::move(what), std::move(fn));
  return true;
}

void hang_current_op(const std::string& why) {
  Lock lk = lock_state();
  if (t_running) t_running->stuck = why;
}

void unstick_current_op() {
  Lock lk = lock_state();
  if (t_running) {
    t_running->stuck.clear();
    st().progress.notify_all();
  }
}

void unstick(cudaStream_t s) {
  Lock lk = lock_state();
  cudaError_t err = cudaSuccess;
  if (Stream* stream = stream_of_locked(s, &err)) {
    stream->stuck.clear();
    st().progress.notify_all();
  }
}

}  // namespace cuemu

using namespace cuemu;

extern "C" {

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int flags) {
  Lock lk = lock_state();
  if (!s) return set_error_locked(cudaErrorInvalidValue);
  Stream* stream = new_stream_locked(flags);
  st().streams.insert(stream);
  *s = reinterpret_cast<cudaStream_t>(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  Lock lk = lock_state();
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!stream || stream == &legacy_locked()) return set_error_locked(cudaErrorInvalidResourceHandle);
  drain_locked(lk, stream, "cudaStreamDestroy");  // queued work still completes
  st().streams.erase(stream);
  for (Event* e : st().events)
    if (e->s == stream) e->s = nullptr;
  if (stream->worker.joinable()) {
    stream->stopping = true;
    st().progress.notify_all();
    lk.unlock();
    stream->worker.join();
    lk.lock();
  }
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  Lock lk = lock_state();
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!stream) return set_error_locked(err);
  drain_locked(lk, stream, "cudaStreamSynchronize");
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
  Lock lk = lock_state();
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!stream) return set_error_locked(err);
  return stream->done >= stream->queued ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaDeviceSynchronize(void) {
  Lock lk = lock_state();
  drain_all_locked(lk, "cudaDeviceSynchronize");
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  Lock lk = lock_state();
  if (!e) return set_error_locked(cudaErrorInvalidValue);
  auto* ev = new Event();
  ev->timing = !(flags & cudaEventDisableTiming);
  st().events.insert(ev);
  *e = reinterpret_cast<cudaEvent_t>(ev);
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, 0); }

cudaError_t cudaEventDestroy(cudaEvent_t e) {
  Lock lk = lock_state();
  Event* ev = event_of_locked(e);
  if (!ev) return set_error_locked(cudaErrorInvalidResourceHandle);
  st().events.erase(ev);
  delete ev;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  Lock lk = lock_state();
  Event* ev = event_of_locked(e);
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!ev || !stream) return set_error_locked(cudaErrorInvalidResourceHandle);
  if (ev->timing)
    enqueue_locked(lk, stream, "event record", [stamp = ev->stamp] { *stamp = std::chrono::steady_clock::now(); });
  ev->s = stream;
  ev->seq = stream->queued;
  ev->queried_pending = false;
  return cudaSuccess;
}

// Host time between the two markers (the emulator's time, not a GPU's).
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Lock lk = lock_state();
  Event* a = event_of_locked(start);
  Event* b = event_of_locked(end);
  if (!a || !b || !ms) return set_error_locked(cudaErrorInvalidResourceHandle);
  if (!a->timing || !b->timing || !a->s || !b->s) return set_error_locked(cudaErrorInvalidResourceHandle);
  if (!done_locked(a->s, a->seq) || !done_locked(b->s, b->seq)) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(*b->stamp - *a->stamp).count();
  return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
  Lock lk = lock_state();
  Event* ev = event_of_locked(e);
  if (!ev) return set_error_locked(cudaErrorInvalidResourceHandle);
  if (!ev->s || ev->s->done >= ev->seq) return cudaSuccess;
  if (mode() != Mode::Lazy) return cudaErrorNotReady;
  if (!ev->queried_pending) {  // lazy: the first poll finds it pending, then the work runs
    ev->queried_pending = true;
    return cudaErrorNotReady;
  }
  return run_until_locked(lk, ev->s, ev->seq) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  Lock lk = lock_state();
  Event* ev = event_of_locked(e);
  if (!ev) return set_error_locked(cudaErrorInvalidResourceHandle);
  if (ev->s) must_finish_locked(lk, ev->s, ev->seq, "cudaEventSynchronize");
  return cudaSuccess;
}

// The stream waits, on the device, for the event's work: here the host waits at queueing time
// (the emulator has no cross-stream dependencies), which is never less ordered than a GPU.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int) {
  Lock lk = lock_state();
  Event* ev = event_of_locked(e);
  cudaError_t err = cudaSuccess;
  Stream* stream = stream_of_locked(s, &err);
  if (!ev || !stream) return set_error_locked(cudaErrorInvalidResourceHandle);
  if (ev->s && ev->s != stream) must_finish_locked(lk, ev->s, ev->seq, "cudaStreamWaitEvent");
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) {
  Lock lk = lock_state();
  return take_error_locked();
}
cudaError_t cudaPeekAtLastError(void) {
  Lock lk = lock_state();
  return peek_error_locked();
}

}  // extern "C"
