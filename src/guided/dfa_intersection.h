#pragma once
// Whether two byte DFAs accept a common string, and the shortest one: a breadth-first walk of the
// product automaton from the pair of start states to the first pair of accepting states. The
// walk visits at most `max_pairs` state pairs, so a pair of huge automata is refused, not walked
// for minutes.
#include <cstdint>
#include <string>

#include "guided/byte_dfa.h"

namespace tpbatch::guided {

struct CommonString {
  enum Outcome { kNone, kFound, kOverBudget } outcome = kNone;
  std::string text;  // kFound: a shortest string both accept
  int64_t pairs = 0;  // state pairs visited
};

CommonString shortest_common_string(ByteDfa& a, ByteDfa& b, int64_t max_pairs);

}  // namespace tpbatch::guided
