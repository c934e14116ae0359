#include "common/mem_available.h"

#include <fstream>
#include <limits>
#include <string>

namespace tpbatch {

int64_t mem_available_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  // "Key:   value [kB]" per line; some lines (HugePages_*) have no unit, so skip to the line's end.
  while (in >> key >> kb) {
    if (key == "MemAvailable:") return kb * 1024;
    in.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return 0;
}

}  // namespace tpbatch
