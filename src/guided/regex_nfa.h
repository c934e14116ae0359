#pragma once
// A regular expression as a Thompson NFA over bytes, matched against a whole string (Python's
// re.fullmatch). The syntax is the common subset that JSON Schema patterns and vLLM's guided_regex
// use: literals, `.`, classes `[a-z\d]` and `[^...]`, escapes (\d \w \s and their negations, \n \t
// \r \f \v, \xHH, \uXXXX, escaped punctuation), groups `(...)` and `(?:...)`, `|`, and the
// quantifiers `* + ? {n} {n,} {n,m}` (a lazy `?` after one is accepted: it changes no match set).
// `^` first and `$` last are accepted (the match is always whole). Text is UTF-8: `.` and negated
// classes match one whole UTF-8 character. Anything else (backreferences, lookaround, anchors
// inside) is refused with a GuidedError naming what and where.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tpbatch::guided {

struct GuidedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A transition on any byte in [lo, hi].
struct ByteEdge {
  uint8_t lo, hi;
  int32_t to;
};

struct Nfa {
  struct State {
    std::vector<ByteEdge> edges;
    std::vector<int32_t> epsilon;
  };
  std::vector<State> states;
  int32_t start = 0;
  int32_t accept = 0;  // the one accepting state
};

// Throws GuidedError for syntax it does not support or a pattern that would build more than
// `max_states` states (bounded repeats copy their operand).
Nfa compile_regex(std::string_view pattern, int64_t max_states = 2'000'000);

// The pattern matching exactly `text` (every regex metacharacter escaped).
std::string regex_escape(std::string_view text);

}  // namespace tpbatch::guided
