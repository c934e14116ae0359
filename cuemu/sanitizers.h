#pragma once
// Which sanitizer the emulator is built under, and its interfaces. CUEMU_TSAN is set by the
// build for the files that run fibers: they are compiled without -fsanitize=thread themselves
// (the scheduler's bookkeeping is shared by the fibers on purpose) and tell ThreadSanitizer about
// every fiber switch and every ordering CUDA guarantees (launch -> threads, grid -> host).
#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#endif
#if !defined(CUEMU_TSAN) && defined(__SANITIZE_THREAD__)
#define CUEMU_TSAN 1
#endif

#ifdef CUEMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CUEMU_TSAN
#include <sanitizer/tsan_interface.h>
#endif
