#pragma once
// `tpbatch inspect`: rows done/total, errors, token counts, throughput, layout. Read-only, without
// a lock: on a running or stopped job's file it counts the rows of its journal too.
#include <ostream>
#include <string>

namespace tpbatch {

void inspect_results(const std::string& path, std::ostream& out);

}  // namespace tpbatch
