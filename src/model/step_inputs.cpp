#include "model/step_inputs.h"

#include <cstring>

#include "common/error.h"

namespace tpbatch {
namespace {

template <typename T>
void put_vec(std::string& out, const std::vector<T>& v) {
  const uint64_t n = v.size();
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
  out.append(reinterpret_cast<const char*>(v.data()), n * sizeof(T));
}

template <typename T>
void get_vec(const std::string& in, size_t& at, std::vector<T>& v) {
  uint64_t n = 0;
  if (at + sizeof n > in.size()) throw Error("corrupt step message");
  std::memcpy(&n, in.data() + at, sizeof n);
  at += sizeof n;
  if (n > (in.size() - at) / sizeof(T)) throw Error("corrupt step message");
  v.resize(n);
  std::memcpy(v.data(), in.data() + at, n * sizeof(T));
  at += n * sizeof(T);
}

}  // namespace

void StepInputs::clear() {
  tokens.clear();
  positions.clear();
  rope_tables.clear();
  seqs.clear();
  block_ids.clear();
  logits.clear();
  embeds.clear();
  draws.clear();
  masks.clear();
  mask_words.clear();
}

std::vector<AttentionSeq> StepInputs::attention_seqs() const {
  std::vector<AttentionSeq> out;
  out.reserve(seqs.size());
  int64_t row = 0;
  for (const auto& s : seqs) {
    out.push_back(AttentionSeq{row, s.num_rows, s.pos_begin, block_ids.data() + s.blocks_begin, s.num_blocks});
    row += s.num_rows;
  }
  return out;
}

std::string StepInputs::serialize() const {
  std::string out;
  put_vec(out, tokens);
  put_vec(out, positions);
  put_vec(out, rope_tables);
  put_vec(out, seqs);
  put_vec(out, block_ids);
  put_vec(out, logits);
  put_vec(out, embeds);
  put_vec(out, draws);
  put_vec(out, masks);
  put_vec(out, mask_words);
  return out;
}

StepInputs StepInputs::deserialize(const std::string& bytes) {
  StepInputs s;
  size_t at = 0;
  get_vec(bytes, at, s.tokens);
  get_vec(bytes, at, s.positions);
  get_vec(bytes, at, s.rope_tables);
  get_vec(bytes, at, s.seqs);
  get_vec(bytes, at, s.block_ids);
  get_vec(bytes, at, s.logits);
  get_vec(bytes, at, s.embeds);
  get_vec(bytes, at, s.draws);
  get_vec(bytes, at, s.masks);
  get_vec(bytes, at, s.mask_words);
  for (const TokenMask& m : s.masks)  // a mask's words lie inside the message's
    if (m.word_begin < 0 || m.num_words < 0 || m.num_words > static_cast<int64_t>(s.mask_words.size()) - m.word_begin)
      throw Error("corrupt step message");
  return s;
}

}  // namespace tpbatch
