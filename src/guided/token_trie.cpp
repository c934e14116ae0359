#include "guided/token_trie.h"

#include <algorithm>

#include "guided/constraint.h"

namespace tpbatch::guided {

// From the usable ids sorted by their bytes: each string shares its longest common prefix with the
// one before, so its new nodes continue the path of open nodes kept on a stack; a node is closed
// (its subtree's end set) when a later string leaves its path.
TokenTrie build_token_trie(const TokenBytes& vocab) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < static_cast<int32_t>(vocab.bytes.size()); ++id)
    if (vocab.usable[id] && !vocab.bytes[id].empty()) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return vocab.bytes[a] < vocab.bytes[b]; });

  TokenTrie t;
  std::vector<int32_t> open;  // open[d]: the node at depth d + 1 on the current path
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& s = vocab.bytes[id];
    size_t common = 0;
    if (prev) {
      const size_t limit = std::min(prev->size(), s.size());
      while (common < limit && (*prev)[common] == s[common]) ++common;
    }
    while (open.size() > common) {
      t.nodes[open.back()].end = static_cast<int32_t>(t.nodes.size());
      open.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      TokenTrie::Node n;
      n.depth = static_cast<int32_t>(d + 1);
      n.byte = static_cast<uint8_t>(s[d]);
      open.push_back(static_cast<int32_t>(t.nodes.size()));
      t.nodes.push_back(n);
    }
    TokenTrie::Node& last = t.nodes[open.back()];
    if (last.token_count == 0) last.first_token = static_cast<int32_t>(t.tokens.size());
    t.tokens.push_back(id);  // equal strings are neighbours: a node's ids stay contiguous
    ++last.token_count;
    t.max_depth = std::max(t.max_depth, static_cast<int32_t>(s.size()));
    prev = &s;
  }
  while (!open.empty()) {
    t.nodes[open.back()].end = static_cast<int32_t>(t.nodes.size());
    open.pop_back();
  }
  return t;
}

}  // namespace tpbatch::guided
