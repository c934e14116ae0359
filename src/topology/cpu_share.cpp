#include "topology/cpu_share.h"

#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <thread>

namespace tpbatch {
namespace {

bool has_cpu(const CpuMask& m, size_t cpu) { return cpu / 64 < m.size() && (m[cpu / 64] >> (cpu % 64) & 1); }

int count_cpus(const CpuMask& m) {
  int n = 0;
  for (uint64_t w : m) n += std::popcount(w);
  return n;
}

}  // namespace

CpuShare share_cpus(const std::vector<CpuMask>& masks, int self) {
  CpuShare s;
  s.local_ranks = static_cast<int>(masks.size());
  const CpuMask& own = masks.at(static_cast<size_t>(self));
  size_t words = 0;
  for (const CpuMask& m : masks) words = std::max(words, m.size());
  CpuMask all(words, 0);
  for (const CpuMask& m : masks)
    for (size_t w = 0; w < m.size(); ++w) all[w] |= m[w];
  s.own_cpus = count_cpus(own);
  s.machine_cpus = std::max(1, count_cpus(all));
  s.sharing = 1;
  for (size_t cpu = 0; cpu < 64 * own.size(); ++cpu) {
    if (!has_cpu(own, cpu)) continue;
    int holders = 0;
    for (const CpuMask& m : masks) holders += has_cpu(m, cpu);
    s.sharing = std::max(s.sharing, holders);
  }
  s.threads = std::max(1, s.own_cpus / s.sharing);
  return s;
}

CpuMask own_cpu_mask() {
  // A cpu_set_t of CPU_SETSIZE (1024) CPUs, larger while the kernel's mask does not fit (EINVAL).
  for (int cpus = CPU_SETSIZE; cpus <= (1 << 20); cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    const size_t bytes = CPU_ALLOC_SIZE(cpus);
    CPU_ZERO_S(bytes, set);
    const int rc = sched_getaffinity(0, bytes, set);
    const int err = errno;
    if (rc == 0) {
      CpuMask m(static_cast<size_t>(cpus + 63) / 64, 0);
      for (int c = 0; c < cpus; ++c)
        if (CPU_ISSET_S(c, bytes, set)) m[static_cast<size_t>(c) / 64] |= uint64_t{1} << (c % 64);
      CPU_FREE(set);
      while (!m.empty() && m.back() == 0) m.pop_back();
      if (!m.empty()) return m;
      break;
    }
    CPU_FREE(set);
    if (err != EINVAL) break;
  }
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  CpuMask m((n + 63) / 64, 0);
  for (unsigned c = 0; c < n; ++c) m[c / 64] |= uint64_t{1} << (c % 64);
  return m;
}

CpuShare cpu_share() {
  const CpuMask own = own_cpu_mask();
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  if (initialized) MPI_Finalized(&finalized);
  if (!initialized || finalized) return share_cpus({own}, 0);

  MPI_Comm machine;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &machine);
  int rank = 0, size = 1;
  MPI_Comm_rank(machine, &rank);
  MPI_Comm_size(machine, &size);
  int mine = static_cast<int>(own.size()), words = 0;
  MPI_Allreduce(&mine, &words, 1, MPI_INT, MPI_MAX, machine);
  CpuMask padded = own;
  padded.resize(static_cast<size_t>(words), 0);
  std::vector<uint64_t> gathered(static_cast<size_t>(words) * static_cast<size_t>(size));
  MPI_Allgather(padded.data(), words, MPI_UINT64_T, gathered.data(), words, MPI_UINT64_T, machine);
  MPI_Comm_free(&machine);
  std::vector<CpuMask> masks(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    masks[static_cast<size_t>(r)].assign(gathered.begin() + static_cast<ptrdiff_t>(r) * words,
                                         gathered.begin() + static_cast<ptrdiff_t>(r + 1) * words);
  return share_cpus(masks, rank);
}

}  // namespace tpbatch
