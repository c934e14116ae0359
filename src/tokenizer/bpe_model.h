#pragma once
// The BPE model of tokenizer.json ("type": "BPE"), as Hugging Face tokenizers runs it: a word is
// split into characters (with byte fallback / unk), then pairs are merged lowest rank first.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/vocab.h"

namespace tpbatch::tok {

class BpeModel {
 public:
  // Reads the "model" object. Throws tpbatch::Error on anything malformed.
  static BpeModel from_json(const Json& model, const JsonPath& at);

  // Appends the ids of one pre-token.
  void tokenize(std::string_view word, std::vector<int32_t>& out) const;

  // Cuts a pre-token into parts that tokenize independently: the ids of the word are the ids of
  // the parts, in order. SentencePiece-style vocabularies (no pre-tokenizer, the whole text is
  // one word) are cut before each "▁" that follows another character, which is exact when
  // no token has "▁" after another character (checked at load). Otherwise the word itself.
  std::vector<std::string_view> independent_parts(std::string_view word) const;

  const Vocab& vocab() const { return vocab_; }

 private:
  struct MergeValue {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  // A symbol of the word being merged: a token id in a doubly linked list (-1: no neighbour).
  struct Symbol {
    int32_t id;
    int32_t prev, next;
    bool alive;
  };
  std::optional<int32_t> id_of(const std::string& token) const;
  // from_json's "merges": each "a b" (or ["a", "b"]) with its rank and the token it makes.
  void read_merges(const Json& model, const JsonPath& at);
  // Whether independent_parts may cut before a "▁" (see there).
  bool metaspace_never_merged_across() const;
  // tokenize, step 1: the word's characters as symbols (with byte fallback and unk), linked.
  std::vector<Symbol> initial_symbols(std::string_view word) const;
  // tokenize, step 2: merges, lowest rank first, then leftmost (HF Word::merge_all).
  void merge_all(std::vector<Symbol>& sym) const;

  Vocab vocab_;
  std::unordered_map<uint64_t, MergeValue> merges_;
  std::optional<int32_t> unk_id_;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  bool split_before_metaspace_ = false;
  int32_t byte_ids_[256];  // id of "<0xNN>", or -1
};

}  // namespace tpbatch::tok
