#include "tokenizer/hf_tokenizer.h"

namespace tpbatch::tok {

namespace {
constexpr size_t kMaxCachedPiece = 256;
}

void HfTokenizer::encode_text(
    std::string_view text, bool at_input_start, std::vector<int32_t>& out,
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>& cache) const {
  std::string norm = normalizer ? normalizer->normalize(std::string(text)) : std::string(text);
  for (const Segment& seg : normalized_matcher.split(norm)) {
    if (seg.id >= 0) {
      out.push_back(seg.id);
      continue;
    }
    std::vector<PreToken> pieces;
    pieces.push_back({norm.substr(seg.start, seg.end - seg.start), at_input_start && seg.start == 0});
    if (pre_tokenizer) pre_tokenizer->pre_tokenize(pieces);
    for (const PreToken& p : pieces) {
      for (std::string_view part : model->independent_parts(p.text)) {
        if (part.size() > kMaxCachedPiece) {
          model->tokenize(part, out);
          continue;
        }
        auto hit = cache.find(part);
        if (hit != cache.end()) {
          out.insert(out.end(), hit->second.begin(), hit->second.end());
          continue;
        }
        std::vector<int32_t> ids;
        model->tokenize(part, ids);
        out.insert(out.end(), ids.begin(), ids.end());
        cache.emplace(std::string(part), std::move(ids));
      }
    }
  }
}

std::vector<int32_t> HfTokenizer::encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> out;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> cache;
  for (const Segment& seg : raw_matcher.split(text)) {
    if (seg.id >= 0) out.push_back(seg.id);
    else encode_text(text.substr(seg.start, seg.end - seg.start), seg.start == 0, out, cache);
  }
  if (post_processor) post_processor->process(out, add_special_tokens);
  return out;
}

std::string HfTokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !has_token_[id]) continue;
    if (skip_special_tokens && special_[id]) continue;
    tokens.push_back(id_to_token_[id]);
  }
  if (!decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  decoder->decode_chain(tokens);
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

std::optional<int32_t> HfTokenizer::token_to_id(std::string_view piece) const {
  if (auto f = added_vocab.find(piece); f != added_vocab.end()) return f->second;
  if (auto f = model->vocab().find(piece); f != model->vocab().end()) return f->second;
  return std::nullopt;
}

std::string HfTokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return {};
  return id_to_token_[id];
}

bool HfTokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < special_.size() && special_[id];
}

}  // namespace tpbatch::tok
