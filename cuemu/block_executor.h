#pragma once
// Runs a kernel grid on the calling OS thread: block after block, each block's threads as fibers
// scheduled until every thread has exited (see kernel_prelude.h for what a kernel sees).
#include <functional>

#include "kernel_prelude.h"

namespace cuemu {

struct Launch {
  Config cfg;
  std::function<void()> body;  // one CUDA thread
};

// CUEMU_ORDER=forward|reverse|random: the order in which blocks, and runnable threads within a
// block, are run (a kernel whose result depends on it has a race).
void run_grid(const Launch& launch);

}  // namespace cuemu
