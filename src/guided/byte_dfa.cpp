#include "guided/byte_dfa.h"

#include <algorithm>

namespace tpbatch::guided {

ByteDfa::ByteDfa(Nfa nfa) : nfa_(std::move(nfa)) {
  std::vector<int32_t> s = {nfa_.start};
  close(s);
  std::lock_guard<std::mutex> lock(mu_);
  intern(std::move(s));
}

void ByteDfa::close(std::vector<int32_t>& set) const {
  std::vector<bool> seen(nfa_.states.size(), false);
  std::vector<int32_t> stack = set;
  set.clear();
  while (!stack.empty()) {
    const int32_t s = stack.back();
    stack.pop_back();
    if (seen[s]) continue;
    seen[s] = true;
    set.push_back(s);
    for (int32_t t : nfa_.states[s].epsilon) stack.push_back(t);
  }
  std::sort(set.begin(), set.end());
}

int32_t ByteDfa::intern(std::vector<int32_t> set) {
  if (set.empty()) return kDead;
  if (auto it = ids_.find(set); it != ids_.end()) return it->second;
  const int32_t id = static_cast<int32_t>(sets_.size());
  accepting_.push_back(std::binary_search(set.begin(), set.end(), nfa_.accept));
  ids_.emplace(set, id);
  sets_.push_back(std::move(set));
  next_.emplace_back();
  next_.back().fill(kUnknown);
  return id;
}

int32_t ByteDfa::next(int32_t state, uint8_t byte) {
  if (state == kDead) return kDead;
  std::lock_guard<std::mutex> lock(mu_);
  return step(state, byte);
}

int32_t ByteDfa::step(int32_t state, uint8_t byte) {
  if (state == kDead) return kDead;
  int32_t& known = next_[state][byte];
  if (known != kUnknown) return known;
  std::vector<int32_t> to;
  for (int32_t s : sets_[state])
    for (const ByteEdge& e : nfa_.states[s].edges)
      if (byte >= e.lo && byte <= e.hi) to.push_back(e.to);
  close(to);
  const int32_t id = intern(std::move(to));
  next_[state][byte] = id;  // `known` may dangle: intern grew next_
  return id;
}

bool ByteDfa::accepting(int32_t state) {
  if (state == kDead) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return accepting_[state];
}

int64_t ByteDfa::num_states() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(sets_.size());
}

}  // namespace tpbatch::guided
