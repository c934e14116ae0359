#include "guided/constraint.h"

#include "guided/json_schema_regex.h"

namespace tpbatch::guided {

std::string constraint_regex(const ConstraintSource& s) {
  if (s.kinds() > 1)
    throw GuidedError("guided: set one of guided_json, guided_json_object, guided_regex, guided_choice");
  try {
    if (s.grammar)
      throw GuidedError("grammars are not supported (use guided_json, guided_regex or guided_choice)");
    if (!s.json_schema.empty()) return json_schema_regex(s.json_schema, s);
    if (s.json_object) return json_object_regex(s);
    if (s.regex) return *s.regex;
    std::string alt;
    for (const std::string& c : s.choice) alt += (alt.empty() ? "" : "|") + regex_escape(c);
    return alt;
  } catch (const GuidedError& e) {
    const char* key = s.grammar ? "guided_grammar" : !s.json_schema.empty() ? "guided_json"
                      : s.json_object ? "guided_json_object" : s.regex ? "guided_regex" : "guided_choice";
    throw GuidedError(std::string(key) + ": " + e.what());
  }
}

std::string constraint_problem(const ConstraintSource& source) {
  try {
    const std::string regex = constraint_regex(source);
    try {
      compile_regex(regex);
    } catch (const GuidedError& e) {
      throw GuidedError(std::string(source.regex ? "guided_regex: " : "guided: ") + e.what());
    }
  } catch (const GuidedError& e) {
    return e.what();
  }
  return "";
}

Constraint::Constraint(const std::string& regex, std::shared_ptr<const TokenBytes> vocab,
                       std::shared_ptr<const TokenTrie> trie)
    : dfa_(compile_regex(regex)),
      vocab_(std::move(vocab)),
      trie_(trie ? std::move(trie) : std::make_shared<const TokenTrie>(build_token_trie(*vocab_))) {}

// A cache miss is walked without holding mu_, so rows at other states are answered meanwhile; two
// rows missing the same state both walk it, and the first stored wins.
const Constraint::AllowedTokens& Constraint::allowed_tokens(int32_t state) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = allowed_.find(state); it != allowed_.end()) return *it->second;
  }
  std::unique_ptr<AllowedTokens> found = walk(state);
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = allowed_[state];
  if (!slot) slot = std::move(found);
  return *slot;
}

// Every trie node's byte taken from its parent's state: a dead prefix skips its subtree.
std::unique_ptr<Constraint::AllowedTokens> Constraint::walk(int32_t state) {
  auto out = std::make_unique<AllowedTokens>();
  const TokenTrie& t = *trie_;
  std::vector<uint64_t> bits((vocab_->bytes.size() + 63) / 64, 0);
  std::vector<int32_t> at_depth(static_cast<size_t>(t.max_depth) + 1);
  at_depth[0] = state;
  {
    ByteDfa::Locked dfa(dfa_);
    const int32_t n = static_cast<int32_t>(t.nodes.size());
    for (int32_t i = 0; i < n;) {
      const TokenTrie::Node& node = t.nodes[i];
      const int32_t s = dfa.next(at_depth[node.depth - 1], node.byte);
      if (s == ByteDfa::kDead) {
        i = node.end;
        continue;
      }
      at_depth[node.depth] = s;
      for (int32_t k = node.first_token; k < node.first_token + node.token_count; ++k)
        bits[static_cast<size_t>(t.tokens[k] / 64)] |= uint64_t{1} << (t.tokens[k] % 64);
      ++i;
    }
  }
  size_t words = bits.size();
  while (words > 0 && bits[words - 1] == 0) --words;
  bits.resize(words);
  for (size_t w = 0; w < words; ++w)
    for (uint64_t b = bits[w]; b; b &= b - 1)
      out->ids.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(b))));
  out->bits = std::move(bits);
  return out;
}

int32_t Constraint::advance(int32_t state, int32_t token) {
  if (token < 0 || token >= static_cast<int32_t>(vocab_->bytes.size()) || !vocab_->usable[token]) return ByteDfa::kDead;
  for (unsigned char b : vocab_->bytes[token]) {
    state = dfa_.next(state, b);
    if (state == ByteDfa::kDead) break;
  }
  return state;
}

std::shared_ptr<Constraint> ConstraintCache::get(const ConstraintSource& source) {
  std::string regex = constraint_regex(source);
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = by_regex_[regex];
  if (!slot) {
    try {
      if (!trie_) trie_ = std::make_shared<const TokenTrie>(build_token_trie(*vocab_));
      slot = std::make_shared<Constraint>(regex, vocab_, trie_);
    } catch (const GuidedError& e) {
      by_regex_.erase(regex);
      throw GuidedError(std::string(source.regex ? "guided_regex: " : "guided: ") + e.what());
    }
  }
  return slot;
}

}  // namespace tpbatch::guided
