#pragma once
// Fibers: one per emulated CUDA thread, switched by hand (a few instructions) so that a block's
// threads can wait for each other at __syncthreads and in warp exchanges on one OS thread. Each
// fiber has a guard-paged stack; AddressSanitizer and ThreadSanitizer are told about every
// switch, so they follow a kernel's accesses thread by thread.
#include <cstddef>

namespace cuemu {

struct Fiber {
  void* sp = nullptr;
  char* base = nullptr;         // mmap'd: a guard page, then the stack
  void* fake_stack = nullptr;   // AddressSanitizer's bookkeeping of this fiber's frames
  void* tsan = nullptr;         // ThreadSanitizer's fiber
};

// The OS thread's own context, to which fibers return.
struct FiberHome {
  void* sp = nullptr;
  const void* stack_bottom = nullptr;
  size_t stack_size = 0;
  void* tsan = nullptr;
};

// The home of the calling OS thread (made on first use).
FiberHome& fiber_home();
// (Re)starts f: the next switch to it calls entry(arg) on a fresh stack. entry must never return;
// it ends with fiber_to_home(f, true).
void fiber_start(Fiber& f, void (*entry)(void*), void* arg);
void fiber_from_home(Fiber& to);
void fiber_to_home(Fiber& from, bool dying = false);
void fiber_to_fiber(Fiber& from, Fiber& to);
// Tells AddressSanitizer that a fiber has just started running (the first thing entry does).
void fiber_entered();

}  // namespace cuemu
