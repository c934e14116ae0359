// Fibers for the emulated CUDA threads: an x86-64 System V context switch of the callee-saved
// registers only. MXCSR and the x87 control word are not switched (saving them costs most of a
// switch), so kernels must not change the floating-point environment.
#include "fiber.h"

#include <pthread.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "sanitizers.h"

extern "C" void cuemu_ctx_switch(void** save_sp, void* load_sp);
extern "C" void cuemu_ctx_trampoline();
asm(R"(
.text
.p2align 4
.globl cuemu_ctx_switch
.type cuemu_ctx_switch,@function
cuemu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size cuemu_ctx_switch,.-cuemu_ctx_switch
.p2align 4
.globl cuemu_ctx_trampoline
.type cuemu_ctx_trampoline,@function
cuemu_ctx_trampoline:
    movq %r12, %rdi
    callq *%r13
    ud2
.size cuemu_ctx_trampoline,.-cuemu_ctx_trampoline
.section .note.GNU-stack,"",@progbits
.text
)");

namespace cuemu {
namespace {

constexpr size_t kStackBytes = size_t(256) << 10;  // per CUDA thread (sanitizer frames are large)
constexpr size_t kGuard = 4096;

}  // namespace

FiberHome& fiber_home() {
  thread_local FiberHome home = [] {
    FiberHome h;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      pthread_attr_getstack(&attr, &addr, &size);
      h.stack_bottom = addr;
      h.stack_size = size;
      pthread_attr_destroy(&attr);
    }
#ifdef CUEMU_TSAN
    h.tsan = __tsan_get_current_fiber();
#endif
    return h;
  }();
  return home;
}

void fiber_start(Fiber& f, void (*entry)(void*), void* arg) {
  if (!f.base) {
    void* p = mmap(nullptr, kStackBytes + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
      std::perror("cuemu: mmap of a fiber stack");
      std::abort();
    }
    mprotect(p, kGuard, PROT_NONE);  // a stack overflow faults instead of corrupting a neighbour
    f.base = static_cast<char*>(p);
#ifdef CUEMU_TSAN
    f.tsan = __tsan_create_fiber(0);
#endif
  }
#ifdef CUEMU_ASAN
  ASAN_UNPOISON_MEMORY_REGION(f.base + kGuard, kStackBytes);  // frames left by the previous block's thread
#endif
  auto* top = reinterpret_cast<uint64_t*>(f.base + kGuard + kStackBytes);
  uint64_t* sp = top - 9;  // cuemu_ctx_switch's frame: 16 bytes, 6 registers, the return address
  sp[0] = sp[1] = 0;
  sp[2] = sp[3] = 0;                                // r15, r14
  sp[4] = reinterpret_cast<uint64_t>(entry);        // r13
  sp[5] = reinterpret_cast<uint64_t>(arg);          // r12
  sp[6] = sp[7] = 0;                                // rbx, rbp
  sp[8] = reinterpret_cast<uint64_t>(&cuemu_ctx_trampoline);
  f.sp = sp;
  f.fake_stack = nullptr;
}

void fiber_entered() {
#ifdef CUEMU_ASAN
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

void fiber_from_home(Fiber& to) {
  FiberHome& home = fiber_home();
#ifdef CUEMU_TSAN
  __tsan_switch_to_fiber(to.tsan, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef CUEMU_ASAN
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, to.base + kGuard, kStackBytes);
#endif
  cuemu_ctx_switch(&home.sp, to.sp);
#ifdef CUEMU_ASAN
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

void fiber_to_home(Fiber& from, bool dying) {
  FiberHome& home = fiber_home();
#ifdef CUEMU_TSAN
  __tsan_switch_to_fiber(home.tsan, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef CUEMU_ASAN
  __sanitizer_start_switch_fiber(dying ? nullptr : &from.fake_stack, home.stack_bottom, home.stack_size);
#endif
  (void)dying;
  cuemu_ctx_switch(&from.sp, home.sp);
#ifdef CUEMU_ASAN
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);
#endif
}

void fiber_to_fiber(Fiber& from, Fiber& to) {
#ifdef CUEMU_TSAN
  __tsan_switch_to_fiber(to.tsan, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef CUEMU_ASAN
  __sanitizer_start_switch_fiber(&from.fake_stack, to.base + kGuard, kStackBytes);
#endif
  cuemu_ctx_switch(&from.sp, to.sp);
#ifdef CUEMU_ASAN
  __sanitizer_finish_switch_fiber(from.fake_stack, nullptr, nullptr);
#endif
}

}  // namespace cuemu
