#pragma once
// The host memory a new allocation can still get without swapping: /proc/meminfo's MemAvailable
// (what the CPU backend reports as free for KV sizing, and what `plan` divides among a node's ranks).
#include <cstdint>

namespace tpbatch {

// MemAvailable in bytes; 0 when /proc/meminfo is unreadable or has no MemAvailable line.
int64_t mem_available_bytes();

}  // namespace tpbatch
