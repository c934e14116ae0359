// The CPU backend's plain host memory: large allocations on 2 MiB boundaries with transparent huge
// pages asked for (the weight stream's speed), zero-filled, and gone from the address space once
// released (the alignment's spare head and tail are unmapped at once, not leaked).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "backend/cpu/host_memory.h"

namespace tpbatch {
namespace {

constexpr size_t kHugePage = size_t(2) << 20;

// The VmFlags line of the mapping that starts at p in /proc/self/smaps, or "" when none starts there.
std::string vm_flags_of_mapping_at(const void* p) {
  std::ostringstream want;
  want << std::hex << reinterpret_cast<uintptr_t>(p) << "-";
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in = false;
  while (std::getline(smaps, line)) {
    if (line.rfind(want.str(), 0) == 0) in = true;
    else if (in && line.rfind("VmFlags:", 0) == 0) return line;
  }
  return "";
}

// The [lo, hi) of the mapping in /proc/self/maps that covers address a; {0, 0} when none does.
std::pair<uintptr_t, uintptr_t> mapping_covering(uintptr_t a) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream in(line);
    in >> std::hex >> lo >> dash >> hi;
    if (a >= lo && a < hi) return {lo, hi};
  }
  return {0, 0};
}

TEST(HostMemory, LargeAllocationsStartOnAHugePageBoundaryZeroFilled) {
  HostMemory mem(false);
  const size_t bytes = 5 * kHugePage + 123;
  auto* p = static_cast<unsigned char*>(mem.allocate(bytes));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kHugePage, 0u);
  for (size_t i = 0; i < bytes; i += 4096) ASSERT_EQ(p[i], 0) << i;
  EXPECT_EQ(p[bytes - 1], 0);
  std::memset(p, 7, bytes);
  mem.release(p, bytes);
}

TEST(HostMemory, LargeAllocationsAskForTransparentHugePages) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) GTEST_SKIP() << "this kernel has no transparent huge pages";
  HostMemory mem(false);
  const size_t bytes = 3 * kHugePage;
  void* p = mem.allocate(bytes);
  const std::string flags = vm_flags_of_mapping_at(p);
  ASSERT_FALSE(flags.empty()) << "no mapping starts at the allocation";
  EXPECT_NE(flags.find(" hg"), std::string::npos) << flags;
  mem.release(p, bytes);
}

// The alignment's spare head and tail are unmapped at allocation: the mapping is exactly the
// allocation's pages, and release unmaps all of it.
TEST(HostMemory, LargeAllocationsMapExactlyTheirPagesAndReleaseThem) {
  HostMemory mem(false);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));  // 4 KiB, or up to 64 KiB on aarch64
  const size_t bytes = kHugePage + page * 3 + 5, pages = kHugePage + page * 4;
  void* p = mem.allocate(bytes);
  const auto at = reinterpret_cast<uintptr_t>(p);
  EXPECT_EQ(mapping_covering(at), std::make_pair(at, at + pages));
  mem.release(p, bytes);
  EXPECT_EQ(mapping_covering(at), std::make_pair(uintptr_t{0}, uintptr_t{0}));
}

}  // namespace
}  // namespace tpbatch
