// The device side of the emulator: blocks of fibers, __syncthreads, warp exchanges. A condition
// CUDA leaves undefined (a barrier not every thread reaches, a shuffle naming an exited lane,
// divergent warp operations, a deadlock) stops the process with the kernel's launch site, the
// block and the thread.
#include "block_executor.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fiber.h"
#include "sanitizers.h"

namespace cuemu {

thread_local const uint3* cur_thread_idx = nullptr;
thread_local BlockState cur_block{};

namespace {

enum class Order { Forward, Reverse, Random };
Order order_from_env() {
  const char* v = std::getenv("CUEMU_ORDER");
  const std::string s = v ? v : "";
  return s == "reverse" ? Order::Reverse : s == "random" ? Order::Random : Order::Forward;
}
const Order g_order = order_from_env();

enum class St { Runnable, AtBarrier, AtWarpOp, Done };

struct WarpOp {  // one pending exchange of a warp (a shuffle, a ballot or a __syncwarp)
  unsigned mask = 0, arrived = 0;
  int kind = 0;
  int width = 32;
  uint64_t val[32] = {};
  int arg[32] = {};
};

struct Thread {
  Fiber fiber;
  uint3 idx{};
  unsigned lane = 0, warp = 0;
  St st = St::Done;
};

struct Warp {
  unsigned exist = 0, done = 0;
  static constexpr int kSlots = 8;
  WarpOp ops[kSlots];     // pending exchanges (mask 0: free slot), with disjoint masks
  uint64_t result[32];    // each lane's result of its last exchange
  char syncwarp_token;    // ThreadSanitizer: __syncwarp orders memory among its lanes (shuffles do not)
};

struct Exec {  // one per OS thread that runs grids
  std::vector<Thread> th;
  std::vector<Warp> warps;
  int cur = -1;
  unsigned n = 0, live = 0, at_barrier = 0;
  uint64_t barrier_phase = 0;
  const Launch* launch = nullptr;
  std::unique_ptr<char[]> dyn;  // dynamic shared memory of exactly the launch's size (ASan sees overruns)
  std::mt19937 rng{12345};
#ifdef CUEMU_TSAN
  char launched, barrier_token[2], block_done;
#endif
};
thread_local Exec t_exec;

[[noreturn]] void device_fail(const char* fmt, ...) {
  Exec& e = t_exec;
  std::fprintf(stderr, "\ncuemu: DEVICE ERROR in the kernel launched at %s:%d, block (%u,%u,%u)",
               e.launch ? e.launch->cfg.file : "?", e.launch ? e.launch->cfg.line : 0, cur_block.idx.x,
               cur_block.idx.y, cur_block.idx.z);
  if (e.cur >= 0) {
    const Thread& t = e.th[e.cur];
    std::fprintf(stderr, ", thread (%u,%u,%u) [warp %u lane %u]", t.idx.x, t.idx.y, t.idx.z, t.warp, t.lane);
  }
  std::fprintf(stderr, ":\n  ");
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

Thread& current(const char* what) {
  if (t_exec.cur < 0) {
    std::fprintf(stderr, "cuemu: %s called outside a kernel\n", what);
    std::abort();
  }
  return t_exec.th[t_exec.cur];
}

void run_thread(int i) {
  Exec& e = t_exec;
  e.cur = i;
  cur_thread_idx = &e.th[i].idx;
  fiber_from_home(e.th[i].fiber);
  e.cur = -1;
}

// From the running thread back to the block's scheduler loop.
void yield_to_scheduler() {
  Thread& t = t_exec.th[t_exec.cur];
  fiber_to_home(t.fiber);
  cur_thread_idx = &t.idx;
}

// From the running thread straight to another (the hot path of warp exchanges).
void yield_to(int to) {
  Exec& e = t_exec;
  Thread& t = e.th[e.cur];
  e.cur = to;
  cur_thread_idx = &e.th[to].idx;
  fiber_to_fiber(t.fiber, e.th[to].fiber);
  e.cur = static_cast<int>(&t - e.th.data());
  cur_thread_idx = &t.idx;
}

void release_barrier(Exec& e) {
  for (Thread& o : e.th)
    if (o.st == St::AtBarrier) o.st = St::Runnable;
  e.at_barrier = 0;
  e.barrier_phase++;
}

// A lane left the kernel: a pending exchange that names it can never complete.
void lane_exited(Exec& e, Thread& t) {
  Warp& w = e.warps[t.warp];
  w.done |= 1u << t.lane;
  for (const WarpOp& op : w.ops)
    if (op.mask && (op.mask & (1u << t.lane)))
      device_fail("lane %u exited while lanes 0x%08x wait in a warp operation whose mask 0x%08x names it", t.lane,
                  op.arrived, op.mask);
}

void thread_main(void*) {
  fiber_entered();
  Exec& e = t_exec;
  Thread& t = e.th[e.cur];
#ifdef CUEMU_TSAN
  __tsan_acquire(&e.launched);  // the launch (stream order) happens before every thread
#endif
  e.launch->body();
#ifdef CUEMU_TSAN
  __tsan_release(&e.block_done);  // for the scheduler: the block's end, then the next block or the host
#endif
  Thread& me = e.th[e.cur];
  (void)t;
  me.st = St::Done;
  e.live--;
  lane_exited(e, me);
  if (e.at_barrier > 0 && e.at_barrier == e.live) release_barrier(e);
  fiber_to_home(me.fiber, true);
  __builtin_trap();
}

[[noreturn]] void deadlock(Exec& e) {
  std::string s;
  for (unsigned w = 0; w < e.warps.size(); ++w) {
    unsigned bar = 0, wop = 0, done = 0;
    for (unsigned l = 0; l < 32 && w * 32 + l < e.n; ++l) {
      const St st = e.th[w * 32 + l].st;
      bar |= (st == St::AtBarrier) << l;
      wop |= (st == St::AtWarpOp) << l;
      done |= (st == St::Done) << l;
    }
    char line[200];
    std::snprintf(line, sizeof line, "\n    warp %u: at __syncthreads 0x%08x, in a warp op 0x%08x, exited 0x%08x", w, bar,
                  wop, done);
    s += line;
  }
  e.cur = -1;
  device_fail("deadlock: no thread can run (a __syncthreads or warp operation that not every thread reaches)%s",
              s.c_str());
}

void run_block(Exec& e, const Launch& L, uint3 bidx) {
  const dim3 b = L.cfg.block;
  e.n = b.x * b.y * b.z;
  cur_block = BlockState{bidx, uint3{b.x, b.y, b.z}, uint3{L.cfg.grid.x, L.cfg.grid.y, L.cfg.grid.z}, nullptr};
  if (L.cfg.smem) {
    std::memset(e.dyn.get(), 0xFF, L.cfg.smem);  // shared memory starts as garbage in every block
    cur_block.dyn_smem = e.dyn.get();
  }
  if (e.th.size() < e.n) e.th.resize(e.n);
  e.warps.resize((e.n + 31) / 32);
  for (Warp& w : e.warps) {
    w.exist = w.done = 0;
    for (WarpOp& o : w.ops) o.mask = o.arrived = 0;
  }
  for (unsigned i = 0; i < e.n; ++i) {
    Thread& t = e.th[i];
    t.idx = uint3{i % b.x, (i / b.x) % b.y, i / (b.x * b.y)};
    t.lane = i % 32;
    t.warp = i / 32;
    t.st = St::Runnable;
    e.warps[t.warp].exist |= 1u << t.lane;
    fiber_start(t.fiber, &thread_main, nullptr);
  }
  e.live = e.n;
  e.at_barrier = 0;
#ifdef CUEMU_TSAN
  __tsan_release(&e.launched);
#endif
  std::vector<unsigned> order(e.n);
  for (unsigned i = 0; i < e.n; ++i) order[i] = g_order == Order::Reverse ? e.n - 1 - i : i;
  while (e.live > 0) {
    if (g_order == Order::Random) std::shuffle(order.begin(), order.end(), e.rng);
    bool ran = false;
    for (unsigned i : order)
      if (e.th[i].st == St::Runnable) {
        run_thread(static_cast<int>(i));
        ran = true;
      }
    if (!ran) deadlock(e);
  }
#ifdef CUEMU_TSAN
  // Blocks run one after another and reuse the shared memory: each block's threads happen before
  // the next block (races are looked for within a block, not between blocks).
  __tsan_acquire(&e.block_done);
#endif
}

}  // namespace

void run_grid(const Launch& L) {
  Exec& e = t_exec;
  e.launch = &L;
  e.dyn.reset(L.cfg.smem ? new char[L.cfg.smem] : nullptr);
  const dim3 g = L.cfg.grid;
  const uint64_t blocks = uint64_t(g.x) * g.y * g.z;
  std::vector<uint64_t> order(blocks);
  for (uint64_t i = 0; i < blocks; ++i) order[i] = g_order == Order::Reverse ? blocks - 1 - i : i;
  if (g_order == Order::Random) std::shuffle(order.begin(), order.end(), e.rng);
  for (uint64_t j : order)
    run_block(e, L, uint3{unsigned(j % g.x), unsigned((j / g.x) % g.y), unsigned(j / (uint64_t(g.x) * g.y))});
  e.launch = nullptr;
  e.dyn.reset();
  cur_block = BlockState{};
}

void syncthreads() {
  Exec& e = t_exec;
  Thread& t = current("__syncthreads");
#ifdef CUEMU_TSAN
  char* token = &e.barrier_token[e.barrier_phase & 1];
  __tsan_release(token);
#endif
  t.st = St::AtBarrier;
  e.at_barrier++;
  if (e.at_barrier == e.live) release_barrier(e);  // the last one in goes on
  else yield_to_scheduler();
#ifdef CUEMU_TSAN
  __tsan_acquire(token);
#endif
}

uint64_t warp_exchange(unsigned mask, int kind, uint64_t val, int arg, int width) {
  Exec& e = t_exec;
  Thread& t = current("a warp intrinsic");
  Warp& w = e.warps[t.warp];
  const unsigned me = 1u << t.lane;
  if (!(mask & me)) device_fail("warp operation with mask 0x%08x called by lane %u, which it excludes", mask, t.lane);
  if (mask & ~w.exist)
    device_fail("warp operation mask 0x%08x names lanes beyond the block's threads (warp has 0x%08x)", mask, w.exist);
  if (mask & w.done) device_fail("warp operation mask 0x%08x names lanes that have exited (0x%08x)", mask, w.done);
  if (width <= 0 || width > 32 || (width & (width - 1))) device_fail("shuffle width %d is not a power of two <= 32", width);
  WarpOp* op = nullptr;
  WarpOp* free_slot = nullptr;
  for (WarpOp& o : w.ops) {
    if (o.mask == mask) {
      op = &o;
      break;
    }
    if (!o.mask) {
      if (!free_slot) free_slot = &o;
    } else if (o.mask & mask) {
      device_fail("divergent warp operations: mask 0x%08x while lanes 0x%08x wait with overlapping mask 0x%08x", mask,
                  o.arrived, o.mask);
    }
  }
  if (!op) {
    if (!free_slot) device_fail("more than %d warp operations pending at once in one warp", Warp::kSlots);
    op = free_slot;
    op->arrived = 0;
    op->mask = mask;
    op->kind = kind;
    op->width = width;
  } else if (op->kind != kind || op->width != width) {
    device_fail("divergent warp operations in one mask 0x%08x: kind %d width %d vs kind %d width %d", mask, kind,
                width, op->kind, op->width);
  }
  if (op->arrived & me) device_fail("lane %u arrived twice at one warp operation", t.lane);
#ifdef CUEMU_TSAN
  if (kind == kSyncwarp) __tsan_release(&w.syncwarp_token);
#endif
  op->val[t.lane] = val;
  op->arg[t.lane] = arg;
  op->arrived |= me;
  const unsigned lane = t.lane;
  if (op->arrived != mask) {
    t.st = St::AtWarpOp;
    // Hand over to the next lane of the mask that has yet to arrive and can run, else to the scheduler.
    const unsigned pending = mask & ~op->arrived;
    const unsigned after = pending & ~((me << 1) - 1);
    const unsigned pick = after ? after : pending;
    int next = -1;
    for (unsigned m = pick; m; m &= m - 1) {
      const int j = int(t.warp * 32 + __builtin_ctz(m));
      if (e.th[j].st == St::Runnable) {
        next = j;
        break;
      }
    }
    if (next >= 0) yield_to(next);
    else yield_to_scheduler();
#ifdef CUEMU_TSAN
    if (kind == kSyncwarp) __tsan_acquire(&w.syncwarp_token);
#endif
    return w.result[lane];
  }
  // Everyone is here: every lane's result, then wake them.
  unsigned ballot = 0;
  for (unsigned j = 0; j < 32; ++j)
    if ((mask >> j & 1) && (op->val[j] & 1)) ballot |= 1u << j;
  for (unsigned j = 0; j < 32; ++j) {
    if (!(mask >> j & 1)) continue;
    uint64_t r = 0;
    if (kind <= static_cast<int>(Shfl::Xor)) {
      const int base = int(j) & ~(op->width - 1), a = op->arg[j];
      int src = int(j);
      switch (static_cast<Shfl>(kind)) {
        case Shfl::Idx: src = base + (a & (op->width - 1)); break;
        case Shfl::Up: src = int(j) - a >= base ? int(j) - a : int(j); break;
        case Shfl::Down: src = int(j) + a < base + op->width ? int(j) + a : int(j); break;
        case Shfl::Xor: src = (int(j) ^ a) < base + op->width ? (int(j) ^ a) : int(j); break;
      }
      if (src < 0 || src > 31 || !(mask >> src & 1))
        device_fail("lane %u reads lane %d, which does not take part in the shuffle (mask 0x%08x): undefined value", j,
                    src, mask);
      r = op->val[src];
    } else if (kind == kBallot) {
      r = ballot;
    }
    w.result[j] = r;
  }
  for (unsigned j = 0; j < 32; ++j)
    if ((mask >> j & 1) && j != lane) e.th[t.warp * 32 + j].st = St::Runnable;
  op->mask = 0;
  op->arrived = 0;
#ifdef CUEMU_TSAN
  if (kind == kSyncwarp) __tsan_acquire(&w.syncwarp_token);
#endif
  return w.result[lane];
}

void* dynamic_shared_raw() {
  if (!cur_block.dyn_smem) {
    current("dynamic shared memory");
    device_fail("extern __shared__ memory used by a kernel launched with 0 bytes of dynamic shared memory");
  }
  return cur_block.dyn_smem;
}

}  // namespace cuemu
