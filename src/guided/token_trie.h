#pragma once
// A vocabulary's token byte strings as a trie laid out in preorder, so that the tokens a DFA state
// allows are found in one walk: tokens that share a prefix share its transitions, and a prefix
// that no match can start skips every token below it at once.
#include <cstdint>
#include <vector>

namespace tpbatch::guided {

struct TokenBytes;

struct TokenTrie {
  struct Node {
    int32_t end = 0;          // one past the last node of this node's subtree
    int32_t first_token = 0;  // tokens[first_token, first_token + token_count): the ids whose bytes end here
    int32_t token_count = 0;
    int32_t depth = 0;        // this node's byte is byte depth - 1 of its tokens
    uint8_t byte = 0;
  };
  std::vector<Node> nodes;    // preorder, children in byte order
  std::vector<int32_t> tokens;
  int32_t max_depth = 0;
};

// The trie of the usable tokens (TokenBytes::usable) of `vocab`.
TokenTrie build_token_trie(const TokenBytes& vocab);

}  // namespace tpbatch::guided
