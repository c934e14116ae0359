// IncrementalDetokenizer: vLLM's incremental detokenization with a sliding prefix window.
#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace tpbatch {

namespace {
constexpr size_t kContextTokens = 5;

bool ends_with_replacement(const std::string& s) {
  return s.size() >= tok::kReplacementChar.size() &&
         s.compare(s.size() - tok::kReplacementChar.size(), tok::kReplacementChar.size(), tok::kReplacementChar) == 0;
}

// The part of `full` after `prefix`; when `full` does not start with `prefix` (a decoder that
// rewrote the join), the bytes past prefix's length, moved forward to a character boundary.
std::string suffix_after(const std::string& full, const std::string& prefix) {
  if (full.size() <= prefix.size()) return {};
  if (full.compare(0, prefix.size(), prefix) == 0) return full.substr(prefix.size());
  size_t k = prefix.size();
  while (k < full.size() && (static_cast<unsigned char>(full[k]) & 0xC0) == 0x80) ++k;
  return full.substr(k);
}
}  // namespace

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, std::span<const int32_t> prompt_tokens)
    : tokenizer_(tokenizer) {
  const size_t n = std::min(prompt_tokens.size(), kContextTokens);
  ids_.assign(prompt_tokens.end() - static_cast<std::ptrdiff_t>(n), prompt_tokens.end());
  context_len_ = n;
  context_text_ = tokenizer_.decode(ids_);
  prefix_offset_ = 0;
  read_offset_ = n;
  prefix_text_ = context_text_;
}

std::string IncrementalDetokenizer::push(int32_t id) {
  ids_.push_back(id);
  std::span<const int32_t> window(ids_.data() + prefix_offset_, ids_.size() - prefix_offset_);
  std::string full = tokenizer_.decode(window);
  if (ends_with_replacement(full)) return {};  // an incomplete UTF-8 sequence: wait for more
  std::string delta = suffix_after(full, prefix_text_);
  if (delta.empty()) return {};
  prefix_offset_ = read_offset_;
  read_offset_ = ids_.size();
  prefix_text_ = tokenizer_.decode(std::span<const int32_t>(ids_.data() + prefix_offset_, read_offset_ - prefix_offset_));
  text_ += delta;
  return delta;
}

std::string IncrementalDetokenizer::flush_text() const {
  std::span<const int32_t> window(ids_.data() + prefix_offset_, ids_.size() - prefix_offset_);
  return text_ + suffix_after(tokenizer_.decode(window), prefix_text_);
}

}  // namespace tpbatch
