#include "backend/nccl_watch.h"

#include <thread>

#include "common/error.h"

namespace tpbatch {

void wait_watching(const std::function<bool()>& done, const std::vector<AsyncErrorSource*>& sources,
                   const std::string& what, std::chrono::microseconds poll_interval) {
  constexpr int kSpinPolls = 200;  // a decode step's wait is often shorter than one sleep
  for (int polls = 0;; ++polls) {
    if (done()) return;
    for (AsyncErrorSource* source : sources) {
      const std::string error = source->poll_async_error();
      if (error.empty()) continue;
      for (AsyncErrorSource* s : sources) s->abort();
      throw Error(what + ": " + source->source_name() + ": " + error + " (communicators aborted)");
    }
    if (polls < kSpinPolls)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(poll_interval);
  }
}

}  // namespace tpbatch
