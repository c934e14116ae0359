#pragma once
// A Hugging Face tokenizer.json tokenizer: SentencePiece-style BPE (Llama-2) and byte-level BPE
// (GPT-2, Llama-3, Qwen2). Immutable after load; safe to use from several threads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tpbatch {

class Tokenizer {
 public:
  // Throws tpbatch::Error naming the file and what is wrong with it.
  static std::unique_ptr<Tokenizer> load(const std::filesystem::path& tokenizer_json);
  static std::unique_ptr<Tokenizer> from_json_text(std::string_view json_text, const std::string& label);
  virtual ~Tokenizer() = default;

  // As Hugging Face `encode(text, add_special_tokens=...)`: added tokens are matched in the raw text
  // whatever add_special_tokens is; add_special_tokens controls only the post-processor (BOS).
  // Never throws on odd input: invalid UTF-8 bytes are encoded through byte fallback / byte level.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true) const = 0;

  // As Hugging Face `decode(ids, skip_special_tokens=...)`. Ids outside the vocabulary are skipped.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = true) const = 0;

  virtual int32_t vocab_size() const = 0;                       // largest id + 1, added tokens included
  virtual std::optional<int32_t> token_to_id(std::string_view piece) const = 0;
  virtual std::string id_to_token(int32_t id) const = 0;        // "" for an unknown id
  virtual bool is_special(int32_t id) const = 0;                // an added token marked special
};

// Turns a growing list of generated ids into text, the way vLLM does: decoded with a few prompt
// tokens as left context (so a leading "▁" becomes a space), and holding back an incomplete UTF-8
// sequence until the bytes that finish it arrive.
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> prompt_tokens);
  // Appends one generated id; returns the text that became final with it (may be empty).
  std::string push(int32_t id);
  // All final text so far.
  const std::string& text() const { return text_; }
  // Text including a trailing incomplete sequence (what a final decode gives).
  std::string flush_text() const;

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;     // context ids followed by generated ids
  size_t context_len_ = 0;
  std::string context_text_;
  std::string text_;
  // vLLM's window: ids_[prefix_offset_, read_offset_) is already emitted text decoded again as
  // left context; ids_[read_offset_, end) is not emitted yet.
  size_t prefix_offset_ = 0;
  size_t read_offset_ = 0;
  std::string prefix_text_;      // decode(ids_[prefix_offset_, read_offset_))
};

}  // namespace tpbatch
