// The NCCL stand-in for ranks that are processes on one machine: the communicator is a POSIX
// shared-memory segment named after the unique id (which the application sends over MPI as it
// would for real NCCL). Operations are queued on the caller's stream and run when the stream
// does, so they rendezvous with the peers' operations like NCCL kernels:
//   - all-reduce / all-gather: every rank publishes a chunk, waits for all, reduces in rank order
//     (bf16/f16 rounded after each addition, as a ring does), waits again before the next chunk;
//     each rank also publishes (op, count, dtype) and a mismatch between ranks is reported;
//   - send/recv: a rendezvous per (sender, receiver) channel: a send completes only once the
//     receiver has posted its recv (two ranks that both send first deadlock, as on GPUs);
//     the byte counts must match.
// A peer that aborted its communicator or whose process died makes the waiting operation fail:
// ncclCommGetAsyncError reports ncclRemoteError and the stream stays stuck (its later work never
// runs) until ncclCommAbort, as with real NCCL kernels. No progress for CUEMU_NCCL_TIMEOUT_S
// (default 300) seconds ends the process with a diagnosis.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <nccl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "host_state.h"


namespace {

constexpr int kMaxRanks = 16;
constexpr size_t kSlot = size_t(1) << 20;     // per rank, collectives
constexpr size_t kChanBytes = size_t(256) << 10;  // per (sender, receiver)
constexpr char kMagic[] = "cuemu-nccl";

struct Desc {  // what a rank's current collective is, for the cross-rank check
  std::atomic<uint64_t> seq;
  std::atomic<int32_t> op, dtype;
  std::atomic<uint64_t> count;
};
struct alignas(64) RankState {
  std::atomic<uint64_t> arrive, leave;
  std::atomic<int32_t> pid, aborted;
  Desc desc;
};
struct alignas(64) Chan {
  std::atomic<uint64_t> ready, filled, bytes;
};
struct Shm {
  std::atomic<int32_t> joined;
  RankState rs[kMaxRanks];
  Chan ch[kMaxRanks][kMaxRanks];
  char slot[kMaxRanks][kSlot];
  char chbuf[kMaxRanks][kMaxRanks][kChanBytes];
};

struct Failure {
  ncclResult_t code;
  std::string what;
};

}  // namespace

struct ncclComm {
  int rank = 0, n = 1;
  Shm* shm = nullptr;
  uint64_t coll_seq = 0, chunk_seq = 0;
  std::vector<uint64_t> sent, recvd;  // chunks per peer
  std::atomic<int> async{ncclSuccess};
  std::string last_error;
  std::atomic<bool> aborted{false};
  std::vector<cudaStream_t> streams;
};

namespace {

thread_local int t_group_depth = 0;
thread_local std::vector<std::function<void()>> t_group_ops;
thread_local cudaStream_t t_group_stream = nullptr;

double timeout_s() {
  const char* v = std::getenv("CUEMU_NCCL_TIMEOUT_S");
  return v ? std::atof(v) : 300.0;
}

// Waits for cond(); throws Failure when a peer aborted or died. Aborts the process on a timeout.
template <class Cond>
void wait_for(ncclComm* c, Cond cond, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t spin = 0;; ++spin) {
    if (cond()) return;
    if (c->aborted) throw Failure{ncclInvalidUsage, "communicator aborted locally"};
    if (spin % 256 == 255) {
      for (int r = 0; r < c->n; ++r) {
        if (r == c->rank) continue;
        if (c->shm->rs[r].aborted.load()) throw Failure{ncclRemoteError, "rank " + std::to_string(r) + " aborted its communicator"};
        const int pid = c->shm->rs[r].pid.load();
        if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
          throw Failure{ncclRemoteError, "rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") died"};
      }
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > timeout_s()) {
        std::fprintf(stderr, "cuemu NCCL: rank %d waited %.0f s in %s: a deadlock (ranks calling different operations?)\n",
                     c->rank, s, what);
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(spin < 4096 ? 0 : 200));
    }
  }
}

size_t dsize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: return 0;
  }
}

// Runs one queued operation: a failure leaves the stream stuck, as a failed NCCL kernel does.
void run_op(const std::shared_ptr<ncclComm>& c, const std::function<void()>& body) {
  if (c->aborted) return;  // an aborted communicator's queued kernels end at once
  try {
    body();
  } catch (const Failure& f) {
    c->last_error = f.what;
    c->async = f.code;
    cuemu::hang_current_op("NCCL operation of rank " + std::to_string(c->rank) + ": " + f.what);
    // An abort that came while this failed ends it: ncclCommAbort sets `aborted` before it
    // unsticks its streams, so either its unstick or this one clears the hang.
    if (c->aborted) cuemu::unstick_current_op();
  }
}

void check_desc(ncclComm* c, int op, ncclDataType_t dt, size_t count) {
  for (int r = 0; r < c->n; ++r) {
    const Desc& d = c->shm->rs[r].desc;
    if (d.op != op || d.dtype != int(dt) || d.count != count) {
      std::fprintf(stderr,
                   "cuemu NCCL: collective #%llu differs between ranks: rank %d op %d dtype %d count %zu, rank %d op %d "
                   "dtype %d count %llu (NCCL would hang or corrupt memory)\n",
                   (unsigned long long)c->coll_seq, c->rank, op, int(dt), count, r, int(d.op), int(d.dtype),
                   (unsigned long long)d.count.load());
      std::abort();
    }
  }
}

// The chunked all-rank exchange both collectives use: put(slot, off, len) fills this rank's slot,
// take(off, len) reads every rank's slots once all have arrived.
template <class Put, class Take>
void exchange(ncclComm* c, int op, ncclDataType_t dt, size_t count, size_t bytes, Put put, Take take) {
  Shm& s = *c->shm;
  RankState& me = s.rs[c->rank];
  c->coll_seq++;
  me.desc.op = op;
  me.desc.dtype = int(dt);
  me.desc.count = count;
  me.desc.seq = c->coll_seq;
  const size_t step = kSlot / 16 * 16;
  size_t off = 0;
  do {
    const size_t len = std::min(step, bytes - off);
    put(s.slot[c->rank], off, len);
    const uint64_t g = ++c->chunk_seq;
    me.arrive.store(g, std::memory_order_release);
    wait_for(c, [&] {
      for (int r = 0; r < c->n; ++r) if (s.rs[r].arrive.load(std::memory_order_acquire) < g) return false;
      return true;
    }, "a collective");
    if (off == 0) check_desc(c, op, dt, count);
    take(off, len);
    me.leave.store(g, std::memory_order_release);
    wait_for(c, [&] {
      for (int r = 0; r < c->n; ++r) if (s.rs[r].leave.load(std::memory_order_acquire) < g) return false;
      return true;
    }, "a collective");
    off += len;
  } while (off < bytes);
}

float ld(const char* p, ncclDataType_t t, size_t i) {
  switch (t) {
    case ncclFloat32: return reinterpret_cast<const float*>(p)[i];
    case ncclFloat16: return __half2float(reinterpret_cast<const __half*>(p)[i]);
    default: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(p)[i]);
  }
}
void st(char* p, ncclDataType_t t, size_t i, float v) {
  switch (t) {
    case ncclFloat32: reinterpret_cast<float*>(p)[i] = v; break;
    case ncclFloat16: reinterpret_cast<__half*>(p)[i] = __float2half_rn(v); break;
    default: reinterpret_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(v); break;
  }
}
float round_to(ncclDataType_t t, float v) {
  if (t == ncclFloat16) return __half2float(__float2half_rn(v));
  if (t == ncclBfloat16) return __bfloat162float(__float2bfloat16_rn(v));
  return v;
}

std::shared_ptr<ncclComm> live(ncclComm_t c) {  // the queued closures keep the state alive
  return std::shared_ptr<ncclComm>(c, [](ncclComm*) {});
}

ncclResult_t queue(ncclComm_t comm, cudaStream_t stream, const char* what, std::function<void()> body) {
  if (!comm || comm->aborted) return ncclInvalidArgument;
  bool known = false;
  for (cudaStream_t s : comm->streams) known |= s == stream;
  if (!known) comm->streams.push_back(stream);
  auto c = live(comm);
  auto op = [c, body = std::move(body)] { run_op(c, body); };
  if (t_group_depth > 0) {  // ncclGroupEnd queues the group's operations as one
    t_group_ops.push_back(op);
    t_group_stream = stream;
    return ncclSuccess;
  }
  return cuemu::enqueue_on(stream, what, op) ? ncclSuccess : ncclInvalidArgument;
}

ncclResult_t bad(const char* fmt, const std::string& why) {
  std::fprintf(stderr, fmt, why.c_str());
  return ncclInvalidArgument;
}

}  // namespace

extern "C" {

ncclResult_t ncclGetVersion(int* v) {
  *v = NCCL_VERSION_CODE;
  return ncclSuccess;
}
const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}
const char* ncclGetLastError(ncclComm_t comm) { return comm ? comm->last_error.c_str() : ""; }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, kMagic, sizeof kMagic);
  std::random_device rd;
  const uint64_t r = (uint64_t(rd()) << 32) ^ rd() ^ uint64_t(getpid());
  std::memcpy(id->internal + 16, &r, sizeof r);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* out, int nranks, ncclUniqueId id, int rank) {
  if (std::memcmp(id.internal, kMagic, sizeof kMagic) != 0) {
    std::fprintf(stderr, "cuemu NCCL: ncclCommInitRank: not an id from ncclGetUniqueId (was it broadcast?)\n");
    return ncclInvalidArgument;
  }
  if (nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) return ncclInvalidArgument;
  uint64_t key;
  std::memcpy(&key, id.internal + 16, sizeof key);
  char name[64];
  std::snprintf(name, sizeof name, "/cuemu-nccl-%016llx", (unsigned long long)key);
  const int fd = shm_open(name, O_CREAT | O_RDWR, 0600);
  if (fd < 0 || ftruncate(fd, sizeof(Shm)) != 0) {
    std::perror("cuemu NCCL: shm_open/ftruncate");
    return ncclSystemError;
  }
  void* p = mmap(nullptr, sizeof(Shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return ncclSystemError;
  auto* c = new ncclComm();
  c->rank = rank;
  c->n = nranks;
  c->shm = static_cast<Shm*>(p);
  c->sent.assign(nranks, 0);
  c->recvd.assign(nranks, 0);
  c->shm->rs[rank].pid = getpid();
  c->shm->joined.fetch_add(1);
  try {
    wait_for(c, [&] { return c->shm->joined.load() >= nranks; }, "ncclCommInitRank");
  } catch (const Failure& f) {
    std::fprintf(stderr, "cuemu NCCL: ncclCommInitRank: %s\n", f.what.c_str());
    return ncclRemoteError;
  }
  if (rank == 0) shm_unlink(name);  // every rank has it mapped
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  munmap(c->shm, sizeof(Shm));
  c->shm = nullptr;
  c->aborted = true;  // closures still queued (they should not be) do nothing
  return ncclSuccess;  // the struct is leaked on purpose: queued closures may still hold it
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
  if (!c) return ncclInvalidArgument;
  c->aborted = true;
  if (c->shm) c->shm->rs[c->rank].aborted = 1;
  for (cudaStream_t s : c->streams) cuemu::unstick(s);  // its kernels end
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t* err) {
  if (!c) return ncclInvalidArgument;
  *err = static_cast<ncclResult_t>(c->async.load());
  return ncclSuccess;
}

ncclResult_t ncclGroupStart() {
  t_group_depth++;
  return ncclSuccess;
}
ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0) return ncclSuccess;
  auto ops = std::move(t_group_ops);
  t_group_ops.clear();
  if (ops.empty()) return ncclSuccess;
  // One queued operation for the group. (Limitation: its point-to-point parts run one after the
  // other, so a group that needs its send and recv to progress together would deadlock here.)
  return cuemu::enqueue_on(t_group_stream, "NCCL group", [ops] { for (auto& op : ops) op(); }) ? ncclSuccess
                                                                                                 : ncclInvalidArgument;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t dt, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if ((op != ncclSum && op != ncclMax) || (dt != ncclFloat32 && dt != ncclFloat16 && dt != ncclBfloat16)) {
    std::fprintf(stderr, "cuemu NCCL: ncclAllReduce: only sum and max over f32/f16/bf16 are emulated\n");
    return ncclInvalidArgument;
  }
  const size_t bytes = count * dsize(dt);
  std::string why;
  if (count && (!cuemu::device_range(sendbuff, bytes, &why) || !cuemu::device_range(recvbuff, bytes, &why)))
    return bad("cuemu NCCL: ncclAllReduce: buffer %s\n", why);
  ncclComm* c = comm;
  return queue(comm, stream, "ncclAllReduce", [=] {
    if (count == 0) return;
    const size_t es = dsize(dt);
    exchange(c, op == ncclMax ? 3 : 1, dt, count, bytes,
             [&](char* slot, size_t off, size_t len) { std::memcpy(slot, static_cast<const char*>(sendbuff) + off, len); },
             [&](size_t off, size_t len) {
               for (size_t i = 0; i < len / es; ++i) {
                 float acc = ld(c->shm->slot[0], dt, i);
                 for (int r = 1; r < c->n; ++r) {
                   const float v = ld(c->shm->slot[r], dt, i);
                   acc = op == ncclMax ? (v > acc ? v : acc) : round_to(dt, acc + v);
                 }
                 st(static_cast<char*>(recvbuff) + off, dt, i, acc);
               }
             });
  });
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t dt, ncclComm_t comm,
                           cudaStream_t stream) {
  const size_t bytes = sendcount * dsize(dt);
  std::string why;
  if (bytes && (!cuemu::device_range(sendbuff, bytes, &why) || !cuemu::device_range(recvbuff, bytes * comm->n, &why)))
    return bad("cuemu NCCL: ncclAllGather: buffer %s\n", why);
  ncclComm* c = comm;
  return queue(comm, stream, "ncclAllGather", [=] {
    if (bytes == 0) return;
    exchange(c, 2, dt, sendcount, bytes,
             [&](char* slot, size_t off, size_t len) { std::memcpy(slot, static_cast<const char*>(sendbuff) + off, len); },
             [&](size_t off, size_t len) {
               for (int r = 0; r < c->n; ++r)
                 std::memcpy(static_cast<char*>(recvbuff) + r * bytes + off, c->shm->slot[r], len);
             });
  });
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  const size_t bytes = count * dsize(dt);
  std::string why;
  if (peer < 0 || peer >= comm->n || peer == comm->rank) return ncclInvalidArgument;
  if (bytes && !cuemu::device_range(sendbuff, bytes, &why)) return bad("cuemu NCCL: ncclSend: buffer %s\n", why);
  ncclComm* c = comm;
  return queue(comm, stream, "ncclSend", [=] {
    Chan& ch = c->shm->ch[c->rank][peer];
    size_t off = 0;
    do {
      const uint64_t g = c->sent[peer];
      wait_for(c, [&] { return ch.ready.load(std::memory_order_acquire) > g; }, "ncclSend (waiting for the peer's recv)");
      const size_t len = std::min(kChanBytes, bytes - off);
      std::memcpy(c->shm->chbuf[c->rank][peer], static_cast<const char*>(sendbuff) + off, len);
      ch.bytes.store(bytes);
      ch.filled.store(g + 1, std::memory_order_release);
      c->sent[peer] = g + 1;
      off += len;
    } while (off < bytes);
  });
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  const size_t bytes = count * dsize(dt);
  std::string why;
  if (peer < 0 || peer >= comm->n || peer == comm->rank) return ncclInvalidArgument;
  if (bytes && !cuemu::device_range(recvbuff, bytes, &why)) return bad("cuemu NCCL: ncclRecv: buffer %s\n", why);
  ncclComm* c = comm;
  return queue(comm, stream, "ncclRecv", [=] {
    Chan& ch = c->shm->ch[peer][c->rank];
    size_t off = 0;
    do {
      const uint64_t g = c->recvd[peer];
      ch.ready.store(g + 1, std::memory_order_release);
      wait_for(c, [&] { return ch.filled.load(std::memory_order_acquire) > g; }, "ncclRecv (waiting for the peer's send)");
      if (ch.bytes.load() != bytes) {
        std::fprintf(stderr, "cuemu NCCL: rank %d receives %zu bytes from rank %d, which sends %llu\n", c->rank, bytes,
                     peer, (unsigned long long)ch.bytes.load());
        std::abort();
      }
      const size_t len = std::min(kChanBytes, bytes - off);
      std::memcpy(static_cast<char*>(recvbuff) + off, c->shm->chbuf[peer][c->rank], len);
      c->recvd[peer] = g + 1;
      off += len;
    } while (off < bytes);
  });
}

}  // extern "C"
