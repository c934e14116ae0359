#pragma once
// The NFA of a regex as a DFA over bytes, built lazily: a DFA state is the epsilon-closed set of
// NFA states it stands for, created the first time a walk reaches it. Thread-safe: the replica
// chooses a step's rows on parallel threads, and rows with the same constraint share one DFA.
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "guided/regex_nfa.h"

namespace tpbatch::guided {

class ByteDfa {
 public:
  static constexpr int32_t kDead = -1;

  explicit ByteDfa(Nfa nfa);

  int32_t start() const { return 0; }
  // The state after `byte` from `state` (kDead: no string with this prefix matches).
  int32_t next(int32_t state, uint8_t byte);
  // next() under one hold of the lock, for walks of many bytes (a vocabulary's trie).
  class Locked {
   public:
    explicit Locked(ByteDfa& dfa) : dfa_(dfa), lock_(dfa.mu_) {}
    int32_t next(int32_t state, uint8_t byte) { return dfa_.step(state, byte); }

   private:
    ByteDfa& dfa_;
    std::lock_guard<std::mutex> lock_;
  };
  bool accepting(int32_t state);
  int64_t num_states();

 private:
  int32_t step(int32_t state, uint8_t byte);     // mu_ held
  int32_t intern(std::vector<int32_t> nfa_set);  // mu_ held
  void close(std::vector<int32_t>& set) const;

  static constexpr int32_t kUnknown = -2;
  Nfa nfa_;
  std::mutex mu_;
  std::map<std::vector<int32_t>, int32_t> ids_;
  std::vector<std::vector<int32_t>> sets_;
  std::vector<std::array<int32_t, 256>> next_;
  std::vector<bool> accepting_;
};

}  // namespace tpbatch::guided
