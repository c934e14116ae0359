#pragma once
// The tokens a constrained row may pick at this step, as the leader ships them with the step to
// the ranks that hold the vocabulary shards (StepInputs::masks): one bit a token id, so a 128k
// vocabulary costs 16 KiB a row where its gathered logits would cost 512 KiB. Each rank applies
// the bits of its own shard inside the LM head (ModelRunner::compute_logits).
#include <cstdint>
#include <vector>

namespace tpbatch {

struct TokenMask {
  int64_t request = 0;     // index into StepInputs::logits
  int64_t word_begin = 0;  // into StepInputs::mask_words
  int64_t num_words = 0;   // ids at or past 64 * num_words are not allowed
};

// The bits of one TokenMask, read-only.
struct TokenMaskBits {
  const uint64_t* words = nullptr;
  int64_t num_words = 0;
  bool allows(int64_t id) const {
    return id >= 0 && (id >> 6) < num_words && ((words[id >> 6] >> (id & 63)) & 1u) != 0;
  }
  // The bits of ids [v0, v0 + count) from bit 0 on: out[k] holds ids v0 + 64k ..+63 (bit j of
  // word k is id v0 + 64k + j; bits past count are 0), ceil(count / 64) words, what
  // Backend::mask_logits reads for one row of a vocabulary shard that may start mid-word.
  void write_shard_words(int64_t v0, int64_t count, uint64_t* out) const {
    const int shift = static_cast<int>(v0 & 63);
    const int64_t first = v0 >> 6;
    for (int64_t k = 0; k * 64 < count; ++k) {
      uint64_t w = word(first + k) >> shift;
      if (shift != 0) w |= word(first + k + 1) << (64 - shift);
      const int64_t left = count - k * 64;
      if (left < 64) w &= (uint64_t{1} << left) - 1;
      out[k] = w;
    }
  }
  uint64_t word(int64_t i) const { return i >= 0 && i < num_words ? words[i] : 0; }
};

// Appends masks to a step's (masks, words): begin() starts one with nothing allowed, allow() adds
// an id to the last one begun.
class TokenMaskWriter {
 public:
  TokenMaskWriter(std::vector<TokenMask>& masks, std::vector<uint64_t>& words) : masks_(masks), words_(words) {}
  void begin(int64_t request) {
    masks_.push_back(TokenMask{request, static_cast<int64_t>(words_.size()), 0});
  }
  void allow(int32_t id) {
    if (id < 0) return;
    grow(id >> 6);
    words_[static_cast<size_t>(masks_.back().word_begin + (id >> 6))] |= uint64_t{1} << (id & 63);
  }
  // Every id set in bits (id i at bit i % 64 of word i / 64).
  void allow_all(const std::vector<uint64_t>& bits) {
    if (bits.empty()) return;
    grow(static_cast<int64_t>(bits.size()) - 1);
    uint64_t* out = words_.data() + masks_.back().word_begin;
    for (size_t i = 0; i < bits.size(); ++i) out[i] |= bits[i];
  }

 private:
  // The last mask's words are the last of the step's: it grows in place to hold `word`.
  void grow(int64_t word) {
    TokenMask& m = masks_.back();
    if (word < m.num_words) return;
    words_.resize(static_cast<size_t>(m.word_begin + word + 1), 0);
    m.num_words = word + 1;
  }

  std::vector<TokenMask>& masks_;
  std::vector<uint64_t>& words_;
};

}  // namespace tpbatch
