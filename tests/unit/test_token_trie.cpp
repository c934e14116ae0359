// The vocabulary trie (src/guided/token_trie.h) and the allowed-token walk over it: every
// subtree holds exactly the tokens with its prefix, and a constraint's allowed tokens found by the
// walk are those a token-by-token walk of the DFA keeps alive, on a vocabulary of random byte
// strings with shared prefixes, duplicates, unusable and empty tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "guided/byte_dfa.h"
#include "guided/constraint.h"
#include "guided/token_trie.h"

using namespace tpbatch::guided;

namespace {

std::shared_ptr<TokenBytes> random_vocab(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::string alphabet = "ab{}\":,0123 ";
  auto v = std::make_shared<TokenBytes>();
  for (int i = 0; i < n; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 6);  // 0: writes nothing
    for (int j = 0; j < len; ++j) s += alphabet[rng() % alphabet.size()];
    if (i > 0 && rng() % 10 == 0) s = v->bytes[rng() % i];  // a duplicate
    v->bytes.push_back(s);
    v->usable.push_back(rng() % 20 != 0);
  }
  return v;
}

// The bytes from the root to node i: in preorder a node's parent is the nearest node before it
// one level up.
std::string path_to(const TokenTrie& t, int32_t i) {
  int32_t depth = t.nodes[i].depth;
  std::string s(static_cast<size_t>(depth), '\0');
  for (int32_t j = i; j >= 0 && depth > 0; --j)
    if (t.nodes[j].depth == depth) s[static_cast<size_t>(--depth)] = static_cast<char>(t.nodes[j].byte);
  return s;
}

}  // namespace

TEST(TokenTrie, EverySubtreeHoldsExactlyTheUsableTokensWithItsPrefix) {
  const auto v = random_vocab(600, 3);
  const TokenTrie t = build_token_trie(*v);
  ASSERT_FALSE(t.nodes.empty());
  for (int32_t i = 0; i < static_cast<int32_t>(t.nodes.size()); ++i) {
    const TokenTrie::Node& n = t.nodes[i];
    ASSERT_GT(n.end, i);
    const std::string prefix = path_to(t, i);
    std::vector<int32_t> want, below, here;
    for (int32_t id = 0; id < static_cast<int32_t>(v->bytes.size()); ++id)
      if (v->usable[id] && !v->bytes[id].empty() && v->bytes[id].compare(0, prefix.size(), prefix) == 0) {
        want.push_back(id);
        if (v->bytes[id] == prefix) here.push_back(id);
      }
    for (int32_t j = i; j < n.end; ++j)
      for (int32_t k = 0; k < t.nodes[j].token_count; ++k) below.push_back(t.tokens[t.nodes[j].first_token + k]);
    std::sort(below.begin(), below.end());
    EXPECT_EQ(below, want) << "prefix '" << prefix << "'";
    std::vector<int32_t> ends(t.tokens.begin() + n.first_token, t.tokens.begin() + n.first_token + n.token_count);
    std::sort(ends.begin(), ends.end());
    EXPECT_EQ(ends, here) << "prefix '" << prefix << "'";
  }
}

TEST(TokenTrie, TheWalksAllowedTokensAreThoseATokenByTokenWalkKeepsAlive) {
  const auto v = random_vocab(800, 5);
  const std::string regex = R"(\{"a": (0|[1-3][0-3]{0,3}), "b": "[ab ]{0,7}"\}|ab(ab)*:?)";
  Constraint c(regex, v);
  // The states a few tokens from the start reach, each compared.
  std::vector<int32_t> frontier = {c.start()}, seen;
  for (int depth = 0; depth < 8 && !frontier.empty(); ++depth) {
    std::vector<int32_t> next;
    for (int32_t state : frontier) {
      if (std::find(seen.begin(), seen.end(), state) != seen.end()) continue;
      seen.push_back(state);
      std::vector<int32_t> want;
      for (int32_t id = 0; id < static_cast<int32_t>(v->bytes.size()); ++id) {
        if (v->bytes[id].empty()) continue;  // writes nothing: never allowed
        if (c.advance(state, id) != ByteDfa::kDead) want.push_back(id);  // its bytes, one at a time
      }
      ASSERT_EQ(c.allowed(state), want) << "state " << state;
      for (size_t i = 0; i < want.size(); i += 2) next.push_back(c.advance(state, want[i]));
    }
    frontier = next;
  }
  EXPECT_GE(seen.size(), 15u) << "the walk compared too few states to mean much";
}
