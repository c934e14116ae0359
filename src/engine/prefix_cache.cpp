#include "engine/prefix_cache.h"

#include <algorithm>

namespace tpbatch {

int64_t prefix_cache_limit(const Sequence& s, int64_t block_size) {
  if (s.scoring || s.embedding || s.long_rope) return 0;  // long_rope: the cache holds short-factor K
  const int64_t before_last = static_cast<int64_t>(s.tokens.size()) - 1;
  return before_last > 0 ? before_last / block_size * block_size : 0;
}

bool prefix_block_being_computed(const Sequence& s, int64_t cached, int64_t limit,
                                 const std::vector<std::unique_ptr<Sequence>>& running, int64_t block_size) {
  const int64_t end = cached + block_size;
  if (end > limit) return false;
  for (const auto& r : running) {
    if (r->long_rope || r->finish_reason || r->num_computed >= end || static_cast<int64_t>(r->tokens.size()) < end) continue;
    if (std::equal(s.tokens.begin(), s.tokens.begin() + end, r->tokens.begin())) return true;
  }
  return false;
}

}  // namespace tpbatch
