#include "tokenizer/added_tokens.h"

#include "tokenizer/utf8.h"

namespace tpbatch::tok {

void AddedTokenMatcher::add(std::string pattern, const AddedToken& token) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    auto b = static_cast<unsigned char>(c);
    auto it = nodes_[node].next.find(b);
    if (it == nodes_[node].next.end()) {
      nodes_.push_back({});
      const auto created = static_cast<int32_t>(nodes_.size() - 1);
      nodes_[node].next[b] = created;
      node = created;
    } else {
      node = it->second;
    }
  }
  if (nodes_[node].token >= 0) return;  // first token with this text wins
  nodes_[node].token = static_cast<int32_t>(tokens_.size());
  tokens_.push_back(token);
}

namespace {

// The code point that ends right before `end` in s[begin, end), if any (valid UTF-8 only).
bool last_char(std::string_view s, size_t begin, size_t end, uint32_t& cp, size_t& start) {
  if (end <= begin) return false;
  size_t k = end - 1;
  while (k > begin && end - k < 4 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
  size_t n = utf8_valid_len(s, k);
  if (n != end - k) {
    cp = static_cast<unsigned char>(s[end - 1]);  // an invalid byte: not a word char / space
    start = end - 1;
    cp = 0xFFFD;
    return true;
  }
  cp = utf8_decode(s, k, n);
  start = k;
  return true;
}

bool first_char(std::string_view s, size_t begin, uint32_t& cp, size_t& len) {
  if (begin >= s.size()) return false;
  size_t n = utf8_valid_len(s, begin);
  if (!n) {
    cp = 0xFFFD;
    len = 1;
    return true;
  }
  cp = utf8_decode(s, begin, n);
  len = n;
  return true;
}

}  // namespace

std::vector<Segment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<Segment> out;
  if (text.empty()) return out;
  if (empty()) {
    out.push_back({0, text.size(), -1});
    return out;
  }
  size_t start_offset = 0;  // end of the last emitted segment
  size_t search = 0;        // where the next match may start
  while (search < text.size()) {
    // Leftmost-longest: the first position where some token matches, the longest one there.
    size_t mstart = std::string_view::npos, mend = 0;
    int32_t mtok = -1;
    for (size_t p = search; p < text.size(); ++p) {
      int32_t node = 0;
      for (size_t q = p; q < text.size(); ++q) {
        auto it = nodes_[node].next.find(static_cast<unsigned char>(text[q]));
        if (it == nodes_[node].next.end()) break;
        node = it->second;
        if (nodes_[node].token >= 0) {
          mtok = nodes_[node].token;
          mend = q + 1;
        }
      }
      if (mtok >= 0) {
        mstart = p;
        break;
      }
    }
    if (mtok < 0) break;
    search = mend;
    const AddedToken& tok = tokens_[mtok];
    size_t start = mstart, stop = mend;
    uint32_t cp;
    size_t pos, len;
    if (tok.single_word) {
      bool start_space = start == 0 || !(last_char(text, 0, start, cp, pos) && is_word_char(cp));
      bool stop_space = stop == text.size() || !(first_char(text, stop, cp, len) && is_word_char(cp));
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t newstart = start;
      while (newstart > 0 && last_char(text, 0, newstart, cp, pos) && is_unicode_whitespace(cp)) newstart = pos;
      start = std::max(newstart, start_offset);
    }
    if (tok.rstrip) {
      while (first_char(text, stop, cp, len) && is_unicode_whitespace(cp)) stop += len;
    }
    if (start < start_offset) start = start_offset;  // overlap with a previous rstrip
    if (start > start_offset) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
    if (search < stop) search = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
  return out;
}

}  // namespace tpbatch::tok
