#pragma once
// A deterministic Llama-2 (SentencePiece-style BPE, byte fallback) tokenizer of any vocabulary size,
// for the synthetic models make_model writes.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tpbatch {

struct SyntheticVocab {
  std::vector<std::string> pieces;                             // id -> piece, exactly vocab_size of them
  std::vector<std::pair<std::string, std::string>> merges;     // in priority order; a+b and a, b are pieces
};

// ids 0..2 = <unk> <s> </s>; 3..258 = <0x00>..<0xFF>; then "▁" and printable ASCII characters; then
// merged pieces (BPE learned on a small built-in English text, then letter extensions) up to
// vocab_size. Throws tpbatch::Error when vocab_size < 260.
SyntheticVocab build_synthetic_vocab(int64_t vocab_size);

// tokenizer.json and tokenizer_config.json texts (stories260K / Llama-2 layout).
std::string make_tokenizer_json(int64_t vocab_size);
std::string make_tokenizer_config_json(int64_t model_max_length);

}  // namespace tpbatch
