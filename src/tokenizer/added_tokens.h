#pragma once
// Added tokens (the "added_tokens" of tokenizer.json) and how they are found in text: leftmost-
// longest matching, with HF's single_word / lstrip / rstrip rules.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tpbatch::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// A run of text: either an added token (id >= 0) or plain text to tokenize (id < 0).
struct Segment {
  size_t start, end;
  int32_t id;
};

class AddedTokenMatcher {
 public:
  // `patterns[i]` is what is searched for token `tokens[i]` (its content, normalized or not).
  void add(std::string pattern, const AddedToken& token);
  bool empty() const { return nodes_.size() <= 1; }
  // Cuts `text` into segments, as HF AddedVocabulary::find_matches. Empty text gives no segment.
  std::vector<Segment> split(std::string_view text) const;

 private:
  struct Node {
    std::map<unsigned char, int32_t> next;
    int32_t token = -1;  // index into tokens_
  };
  std::vector<Node> nodes_{1};
  std::vector<AddedToken> tokens_;
};

}  // namespace tpbatch::tok
