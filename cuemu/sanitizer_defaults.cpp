// Defaults of the sanitized flavours, compiled into every program that links one (the options
// in the environment still win). A ThreadSanitizer finding ends the program: a test must fail on
// a race, not print it and pass. Leak checking is off: the emulator keeps its device state, and
// NCCL communicators whose queued work may still refer to them, for the life of the process.
extern "C" const char* __asan_default_options() { return "detect_leaks=0"; }
extern "C" const char* __tsan_default_options() { return "halt_on_error=1:second_deadlock_stack=1"; }

#ifdef __SANITIZE_THREAD__
// Under ThreadSanitizer the CPU backend (which the GPU tests compare with) runs on one OpenMP
// thread: libgomp synchronises its workers in code that is not instrumented, so their accesses
// would be reported as races against the test's own.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
namespace {
[[maybe_unused]] const bool kOneOpenMpThread = [] {
  if (omp_set_num_threads) omp_set_num_threads(1);
  return true;
}();
}  // namespace
#endif
