#pragma once
// Where a replica gets its rows and sends its results. Data-parallel replicas take rows
// dynamically from one dispatcher (world rank 0), so a slow replica never holds the others back.
#include <cstdint>
#include <string>
#include <vector>

#include "io/row_result.h"

namespace tpbatch {

struct WorkItem {
  int64_t index = 0;              // 0-based input line
  int64_t first_row = 0;          // its sample 0's results row (= index unless earlier lines have n > 1)
  std::vector<int32_t> samples;   // the samples to compute (resume: those not done yet)
  std::string line;
};

class WorkSource {
 public:
  virtual ~WorkSource() = default;
  // Appends up to max_items rows. With wait, blocks until some arrive or the input is exhausted.
  // Returns false once the input is exhausted (nothing more will ever come).
  virtual bool take(std::vector<WorkItem>& out, size_t max_items, bool wait) = 0;
  virtual void submit(const RowResult& result) = 0;
  virtual void poll() = 0;    // a chance for the dispatcher to serve other replicas between steps
  virtual void close() = 0;   // this replica has finished every row it took
};

}  // namespace tpbatch
