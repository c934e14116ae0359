#pragma once
// The Tokenizer built from a tokenizer.json: added tokens, normalizer, pre-tokenizer, BPE model,
// post-processor and decoder, run in Hugging Face's order.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace tpbatch::tok {

class HfTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const override;
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_token_.size()); }
  std::optional<int32_t> token_to_id(std::string_view piece) const override;
  std::string id_to_token(int32_t id) const override;
  bool is_special(int32_t id) const override;

  // Filled by the tokenizer.json reader (tokenizer_json.cpp).
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized=false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized=true (normalized content)
  Vocab added_vocab;                     // content -> id of added tokens
  std::vector<std::string> id_to_token_;
  std::vector<uint8_t> has_token_, special_;

 private:
  void encode_text(std::string_view text, bool at_input_start, std::vector<int32_t>& out,
                   std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>& cache) const;
};

}  // namespace tpbatch::tok
