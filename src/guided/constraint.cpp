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

Constraint::Constraint(const std::string& regex, std::shared_ptr<const TokenBytes> vocab)
    : dfa_(compile_regex(regex)), vocab_(std::move(vocab)) {}

const Constraint::AllowedTokens& Constraint::allowed_tokens(int32_t state) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = allowed_[state];
  if (slot) return *slot;
  slot = std::make_unique<AllowedTokens>();
  const int32_t n = static_cast<int32_t>(vocab_->bytes.size());
  for (int32_t id = 0; id < n; ++id) {
    if (!vocab_->usable[id]) continue;
    int32_t s = state;
    for (unsigned char b : vocab_->bytes[id]) {
      s = dfa_.next(s, b);
      if (s == ByteDfa::kDead) break;
    }
    if (s != ByteDfa::kDead) slot->ids.push_back(id);
  }
  if (!slot->ids.empty()) slot->bits.assign(static_cast<size_t>(slot->ids.back() / 64 + 1), 0);
  for (int32_t id : slot->ids) slot->bits[static_cast<size_t>(id / 64)] |= uint64_t{1} << (id % 64);
  return *slot;
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
      slot = std::make_shared<Constraint>(regex, vocab_);
    } catch (const GuidedError& e) {
      by_regex_.erase(regex);
      throw GuidedError(std::string(source.regex ? "guided_regex: " : "guided: ") + e.what());
    }
  }
  return slot;
}

}  // namespace tpbatch::guided
