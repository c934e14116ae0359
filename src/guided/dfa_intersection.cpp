#include "guided/dfa_intersection.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace tpbatch::guided {
namespace {

struct Visited {
  int32_t a, b;
  int64_t parent;  // index into the visited list; -1 for the start pair
  uint8_t byte;    // the byte that led here from the parent
};

uint64_t key(int32_t a, int32_t b) {
  return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
}

std::string path_to(const std::vector<Visited>& seen, int64_t at) {
  std::string text;
  for (; seen[at].parent >= 0; at = seen[at].parent) text += static_cast<char>(seen[at].byte);
  std::reverse(text.begin(), text.end());
  return text;
}

}  // namespace

CommonString shortest_common_string(ByteDfa& a, ByteDfa& b, int64_t max_pairs) {
  std::vector<Visited> seen = {{a.start(), b.start(), -1, 0}};
  std::unordered_map<uint64_t, int64_t> index = {{key(a.start(), b.start()), 0}};
  // Breadth first, so the first accepting pair reached is at the least depth: a shortest string.
  for (int64_t at = 0; at < static_cast<int64_t>(seen.size()); ++at) {
    const Visited here = seen[at];
    if (a.accepting(here.a) && b.accepting(here.b)) return {CommonString::kFound, path_to(seen, at), at + 1};
    for (int byte = 0; byte < 256; ++byte) {
      const int32_t na = a.next(here.a, static_cast<uint8_t>(byte));
      if (na == ByteDfa::kDead) continue;
      const int32_t nb = b.next(here.b, static_cast<uint8_t>(byte));
      if (nb == ByteDfa::kDead) continue;
      if (!index.emplace(key(na, nb), static_cast<int64_t>(seen.size())).second) continue;
      if (static_cast<int64_t>(seen.size()) >= max_pairs) return {CommonString::kOverBudget, "", max_pairs};
      seen.push_back({na, nb, at, static_cast<uint8_t>(byte)});
    }
  }
  return {CommonString::kNone, "", static_cast<int64_t>(seen.size())};
}

}  // namespace tpbatch::guided
