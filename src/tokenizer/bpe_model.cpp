#include "tokenizer/bpe_model.h"

#include <queue>

#include "tokenizer/utf8.h"

namespace tpbatch::tok {

std::optional<int32_t> BpeModel::id_of(const std::string& token) const {
  auto f = vocab_.find(token);
  if (f == vocab_.end()) return std::nullopt;
  return f->second;
}

BpeModel BpeModel::from_json(const Json& model, const JsonPath& at) {
  BpeModel m;
  const Json& vocab = require(model, "vocab", at);
  if (!vocab.is_object()) at.child("vocab").fail("must be an object {token: id}");
  m.vocab_.reserve(vocab.size());
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const JsonPath vat = at.child("vocab");
    int64_t id = as_int(it.value(), vat);
    if (id < 0 || id > kMaxTokenId) vat.fail("token \"" + it.key() + "\" has id " + std::to_string(id) + " out of range");
    m.vocab_[it.key()] = static_cast<int32_t>(id);
  }

  if (auto unk = opt_string(model, "unk_token", at)) {
    m.unk_id_ = m.id_of(*unk);
    if (!m.unk_id_) at.child("unk_token").fail("\"" + *unk + "\" is not in vocab");
  }
  m.continuing_subword_prefix_ = opt_string(model, "continuing_subword_prefix", at).value_or("");
  m.end_of_word_suffix_ = opt_string(model, "end_of_word_suffix", at).value_or("");
  m.fuse_unk_ = opt_bool(model, "fuse_unk", false, at);
  m.byte_fallback_ = opt_bool(model, "byte_fallback", false, at);
  m.ignore_merges_ = opt_bool(model, "ignore_merges", false, at);

  static const char* hex = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    std::string code = "<0x";
    code.push_back(hex[b >> 4]);
    code.push_back(hex[b & 15]);
    code.push_back('>');
    m.byte_ids_[b] = m.id_of(code).value_or(-1);
  }
  m.read_merges(model, at);
  m.split_before_metaspace_ = m.metaspace_never_merged_across();
  return m;
}

void BpeModel::read_merges(const Json& model, const JsonPath& at) {
  const JsonPath mat = at.child("merges");
  const Json* merges = member(model, "merges", at);
  if (!merges) return;
  if (!merges->is_array()) mat.fail("must be an array");
  merges_.reserve(merges->size() * 2);
  const size_t prefix_len = continuing_subword_prefix_.size();
  for (size_t i = 0; i < merges->size(); ++i) {
    const Json& e = (*merges)[i];
    const JsonPath eat = {at.label, "merges[" + std::to_string(i) + "]"};
    std::string a, b;
    if (e.is_string()) {
      const std::string s = e.get<std::string>();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) eat.fail("\"" + s + "\" is not two tokens separated by a space");
      a = s.substr(0, sp);
      b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      eat.fail("must be a string \"a b\" or a pair [\"a\", \"b\"]");
    }
    auto ia = id_of(a);
    if (!ia) eat.fail("names token \"" + a + "\" not in vocab");
    auto ib = id_of(b);
    if (!ib) eat.fail("names token \"" + b + "\" not in vocab");
    std::string merged = a + (b.size() >= prefix_len ? b.substr(prefix_len) : std::string());
    auto in = id_of(merged);
    if (!in) eat.fail("makes token \"" + merged + "\" not in vocab");
    merges_[pair_key(*ia, *ib)] = MergeValue{static_cast<int32_t>(i), *in};
  }
}

// Can a word be cut before a "▁" that follows another character? Only if no merge can
// ever join across that point: no token has the metaspace right after a different character.
bool BpeModel::metaspace_never_merged_across() const {
  static constexpr std::string_view kMeta = "\xE2\x96\x81";
  if (ignore_merges_ || !continuing_subword_prefix_.empty() || !end_of_word_suffix_.empty() ||
      vocab_.count(kMeta) == 0)
    return false;
  for (const auto& [t, id] : vocab_)
    for (size_t pos = t.find(kMeta, 1); pos != std::string::npos; pos = t.find(kMeta, pos + 1))
      if (pos < kMeta.size() || t.compare(pos - kMeta.size(), kMeta.size(), kMeta) != 0) return false;
  return true;
}

std::vector<std::string_view> BpeModel::independent_parts(std::string_view word) const {
  std::vector<std::string_view> parts;
  if (!split_before_metaspace_ || word.size() < 64) {
    parts.push_back(word);
    return parts;
  }
  static constexpr std::string_view kMeta = "\xE2\x96\x81";
  size_t start = 0;
  for (size_t pos = word.find(kMeta, 1); pos != std::string_view::npos; pos = word.find(kMeta, pos + 1)) {
    if (pos >= kMeta.size() && word.compare(pos - kMeta.size(), kMeta.size(), kMeta) == 0) continue;
    parts.push_back(word.substr(start, pos - start));
    start = pos;
  }
  parts.push_back(word.substr(start));
  return parts;
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto f = vocab_.find(word);
    if (f != vocab_.end()) {
      out.push_back(f->second);
      return;
    }
  }

  std::vector<Symbol> sym = initial_symbols(word);
  if (sym.empty()) return;
  merge_all(sym);
  for (const Symbol& s : sym)
    if (s.alive) out.push_back(s.id);
}

// HF merge_word: each character (with the continuing-subword prefix and end-of-word suffix) is
// its token, else its bytes' tokens (byte fallback), else unk (runs of unk fused with fuse_unk).
std::vector<BpeModel::Symbol> BpeModel::initial_symbols(std::string_view word) const {
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  auto add = [&](int32_t id) {
    const int32_t n = static_cast<int32_t>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  };
  int32_t pending_unk = -1;  // an unk not yet added (fuse_unk grows it)
  std::string buf;
  for (size_t i = 0; i < word.size();) {
    const size_t n = utf8_char_len(word, i);
    const bool first = i == 0, last = i + n >= word.size();
    std::string_view ch = word.substr(i, n);
    std::string_view key = ch;
    if ((!first && !continuing_subword_prefix_.empty()) || (last && !end_of_word_suffix_.empty())) {
      buf.clear();
      if (!first) buf += continuing_subword_prefix_;
      buf += ch;
      if (last) buf += end_of_word_suffix_;
      key = buf;
    }
    i += n;
    auto f = vocab_.find(key);
    if (f != vocab_.end()) {
      if (pending_unk >= 0) {
        add(pending_unk);
        pending_unk = -1;
      }
      add(f->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char c : key) all = all && byte_ids_[static_cast<uint8_t>(c)] >= 0;
      if (all) {
        for (char c : key) add(byte_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add(pending_unk);
  if (!sym.empty()) sym.back().next = -1;
  return sym;
}

void BpeModel::merge_all(std::vector<Symbol>& sym) const {
  struct Item {
    int32_t rank, pos, new_id;
    bool operator<(const Item& o) const {  // priority_queue pops the largest: invert
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<Item> heap_storage;
  heap_storage.reserve(sym.size());
  std::priority_queue<Item> queue(std::less<Item>(), std::move(heap_storage));
  auto find_merge = [&](int32_t a, int32_t b) -> const MergeValue* {
    auto f = merges_.find(pair_key(a, b));
    return f == merges_.end() ? nullptr : &f->second;
  };
  for (size_t k = 0; k + 1 < sym.size(); ++k)
    if (const MergeValue* mv = find_merge(sym[k].id, sym[k + 1].id))
      queue.push({mv->rank, static_cast<int32_t>(k), mv->new_id});

  while (!queue.empty()) {
    const Item top = queue.top();
    queue.pop();
    Symbol& cur = sym[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    Symbol& right = sym[cur.next];
    const MergeValue* mv = find_merge(cur.id, right.id);
    if (!mv || mv->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    right.alive = false;
    cur.next = right.next;
    if (cur.next >= 0) sym[cur.next].prev = top.pos;
    if (cur.prev >= 0)
      if (const MergeValue* pm = find_merge(sym[cur.prev].id, cur.id)) queue.push({pm->rank, cur.prev, pm->new_id});
    if (cur.next >= 0)
      if (const MergeValue* nm = find_merge(cur.id, sym[cur.next].id)) queue.push({nm->rank, top.pos, nm->new_id});
  }
}

}  // namespace tpbatch::tok
