#pragma once
// A compiled constraint: the regex its source stands for as a lazy byte DFA, and for each DFA
// state the vocabulary tokens whose bytes keep a match possible (found in one walk of the
// vocabulary's trie, cached per state). The matcher state of a row is one DFA state, advanced by each chosen
// token's bytes: a function of the row's generated tokens alone, so a resumed or recomputed row
// gets the same masks.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "guided/byte_dfa.h"
#include "guided/constraint_source.h"
#include "guided/token_trie.h"

namespace tpbatch::guided {

// The bytes each token id writes into the output text; special tokens (and those that write
// nothing) are never allowed by a constraint.
struct TokenBytes {
  std::vector<std::string> bytes;  // [vocab]
  std::vector<bool> usable;        // [vocab]
};

// The regex a source stands for (validates it; throws GuidedError naming the kind: "guided_json:
// JSON Schema keyword 'not' at #/properties/a is not supported").
std::string constraint_regex(const ConstraintSource& source);

// Checks a source compiles (the regex parses, the schema is in the subset) without a vocabulary:
// "" when it does, else why. For the job file's keys, checked before any weights load.
std::string constraint_problem(const ConstraintSource& source);

class Constraint {
 public:
  // trie: vocab's (build_token_trie), shared by the constraints of one vocabulary; built here when null.
  Constraint(const std::string& regex, std::shared_ptr<const TokenBytes> vocab,
             std::shared_ptr<const TokenTrie> trie = nullptr);

  int32_t start() const { return 0; }
  // Token ids allowed from `state`, ascending; EOS is not among them (see complete()).
  const std::vector<int32_t>& allowed(int32_t state) { return allowed_tokens(state).ids; }
  // The same set as bits, id i at bit i % 64 of word i / 64, up to the last word with one set: a
  // step's mask copies these words rather than setting a bit per id (a JSON string's state
  // allows most of a 128k vocabulary).
  const std::vector<uint64_t>& allowed_bits(int32_t state) { return allowed_tokens(state).bits; }
  // Whether the output so far is a whole match: EOS (ending the row) is allowed.
  bool complete(int32_t state) { return dfa_.accepting(state); }
  // The state after `token` (ByteDfa::kDead when the token was not allowed).
  int32_t advance(int32_t state, int32_t token);

 private:
  struct AllowedTokens {
    std::vector<int32_t> ids;
    std::vector<uint64_t> bits;
  };
  const AllowedTokens& allowed_tokens(int32_t state);
  std::unique_ptr<AllowedTokens> walk(int32_t state);

  ByteDfa dfa_;
  std::shared_ptr<const TokenBytes> vocab_;
  std::shared_ptr<const TokenTrie> trie_;
  std::mutex mu_;
  std::unordered_map<int32_t, std::unique_ptr<AllowedTokens>> allowed_;
};

// Compiled constraints by content: rows with the same constraint share one (and its mask cache).
class ConstraintCache {
 public:
  explicit ConstraintCache(std::shared_ptr<const TokenBytes> vocab) : vocab_(std::move(vocab)) {}
  // Throws GuidedError when the source does not compile.
  std::shared_ptr<Constraint> get(const ConstraintSource& source);

 private:
  std::shared_ptr<const TokenBytes> vocab_;
  std::mutex mu_;
  std::shared_ptr<const TokenTrie> trie_;  // built with the first constraint
  std::map<std::string, std::shared_ptr<Constraint>> by_regex_;
};

}  // namespace tpbatch::guided
