#pragma once
// Pre-tokenizers of tokenizer.json: ByteLevel, Split, Sequence, Metaspace, Digits,
// Whitespace, WhitespaceSplit. Each turns a list of pieces into a finer list of pieces.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace tpbatch::tok {

struct PreToken {
  std::string text;
  bool at_input_start = false;  // begins at offset 0 of the original input (Metaspace "first")
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` with the pieces this pre-tokenizer cuts them into; empty ones are dropped.
  virtual void pre_tokenize(std::vector<PreToken>& pieces) const = 0;
};

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& v, const JsonPath& at);

// GPT-2's pre-tokenization regex (ByteLevel use_regex).
inline constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace tpbatch::tok
