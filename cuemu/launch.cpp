// Kernel launches: the configuration is checked as the runtime checks it (a bad one sets the
// sticky error that cudaGetLastError returns, and nothing runs), then the grid is queued.
#include <cstdio>
#include <memory>

#include "block_executor.h"
#include "host_state.h"

namespace cuemu {

void submit(const Config& cfg, std::function<void()> body) {
  Lock lk = lock_state();
  const dim3 g = cfg.grid, b = cfg.block;
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  const char* bad = nullptr;
  if (g.x == 0 || g.y == 0 || g.z == 0) bad = "a grid dimension is 0";
  else if (g.x > 2147483647u || g.y > 65535 || g.z > 65535) bad = "grid dimension above the limit";
  else if (threads == 0) bad = "a block dimension is 0";
  else if (b.x > 1024 || b.y > 1024 || b.z > 64 || threads > 1024) bad = "more than 1024 threads per block";
  else if (cfg.smem > 48 * 1024) bad = "more than 48 KiB of dynamic shared memory without cudaFuncSetAttribute";
  if (bad) {
    complain("launch at %s:%d: invalid configuration grid (%u,%u,%u) block (%u,%u,%u) smem %zu: %s", cfg.file,
             cfg.line, g.x, g.y, g.z, b.x, b.y, b.z, cfg.smem, bad);
    set_error_locked(cudaErrorInvalidConfiguration);
    return;
  }
  cudaError_t err = cudaSuccess;
  Stream* s = stream_of_locked(cfg.stream, &err);
  if (!s) {
    set_error_locked(err);
    return;
  }
  auto launch = std::make_shared<Launch>(Launch{cfg, std::move(body)});
  char what[256];
  std::snprintf(what, sizeof what, "kernel %s:%d grid (%u,%u,%u) block %u", cfg.file, cfg.line, g.x, g.y, g.z,
                unsigned(threads));
  enqueue_locked(lk, s, what, [launch] { run_grid(*launch); });
}

}  // namespace cuemu
