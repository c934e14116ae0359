#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/regex.h"
#include "tokenizer/utf8.h"

namespace tpbatch::tok {

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const std::string& s, const JsonPath& at) {
  if (s == "Removed") return Behavior::Removed;
  if (s == "Isolated") return Behavior::Isolated;
  if (s == "MergedWithPrevious") return Behavior::MergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::MergedWithNext;
  if (s == "Contiguous") return Behavior::Contiguous;
  at.fail("\"" + s + "\" is not a split behavior");
}

// As HF NormalizedString::split: spans (with is_match) -> kept slices, following `behavior`.
void split_spans(const PreToken& piece, std::vector<Span> spans, Behavior behavior, std::vector<PreToken>& out) {
  struct Cut { size_t a, b; bool remove; };
  std::vector<Cut> cuts;
  cuts.reserve(spans.size());
  switch (behavior) {
    case Behavior::Removed:
      for (const Span& s : spans) cuts.push_back({s.start, s.end, s.is_match});
      break;
    case Behavior::Isolated:
      for (const Span& s : spans) cuts.push_back({s.start, s.end, false});
      break;
    case Behavior::MergedWithPrevious: {
      bool prev_match = false;
      for (const Span& s : spans) {
        if (s.is_match && !prev_match && !cuts.empty()) cuts.back().b = s.end;
        else cuts.push_back({s.start, s.end, false});
        prev_match = s.is_match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev_match = false;
      for (size_t k = spans.size(); k-- > 0;) {
        const Span& s = spans[k];
        if (s.is_match && !prev_match && !cuts.empty()) cuts.back().a = s.start;
        else cuts.push_back({s.start, s.end, false});
        prev_match = s.is_match;
      }
      std::reverse(cuts.begin(), cuts.end());
      break;
    }
    case Behavior::Contiguous: {
      bool prev_match = false;
      for (const Span& s : spans) {
        if (s.is_match == prev_match && !cuts.empty()) cuts.back().b = s.end;
        else cuts.push_back({s.start, s.end, false});
        prev_match = s.is_match;
      }
      break;
    }
  }
  for (const Cut& c : cuts) {
    if (c.remove || c.b <= c.a) continue;
    out.push_back({piece.text.substr(c.a, c.b - c.a), piece.at_input_start && c.a == 0});
  }
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  Pattern pattern;
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (const PreToken& p : pieces) {
      auto spans = pattern.find_matches(p.text);
      if (invert)
        for (Span& s : spans) s.is_match = !s.is_match;
      split_spans(p, std::move(spans), behavior, out);
    }
    pieces = std::move(out);
  }
};

// Splits on every match of a regex, with a fixed behavior (Digits, Whitespace, ...).
class RegexSplitPreTokenizer : public PreTokenizer {
 public:
  std::unique_ptr<Regex> regex;
  Behavior behavior = Behavior::Isolated;
  bool invert = false;
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (const PreToken& p : pieces) {
      std::vector<Span> spans;
      size_t prev = 0;
      for (auto [a, b] : regex->find_all(p.text)) {
        if (prev != a) spans.push_back({prev, a, invert});
        spans.push_back({a, b, !invert});
        prev = b;
      }
      if (prev != p.text.size() || p.text.empty()) spans.push_back({prev, p.text.size(), invert});
      split_spans(p, std::move(spans), behavior, out);
    }
    pieces = std::move(out);
  }
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  bool add_prefix_space = false;
  std::unique_ptr<Regex> regex;  // null when use_regex is false
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    out.reserve(pieces.size());
    for (PreToken& p : pieces) {
      if (add_prefix_space && (p.text.empty() || p.text[0] != ' ')) p.text.insert(p.text.begin(), ' ');
      if (regex) {
        std::vector<Span> spans;
        size_t prev = 0;
        for (auto [a, b] : regex->find_all(p.text)) {
          if (prev != a) spans.push_back({prev, a, false});
          spans.push_back({a, b, true});
          prev = b;
        }
        if (prev != p.text.size()) spans.push_back({prev, p.text.size(), false});
        split_spans(p, std::move(spans), Behavior::Isolated, out);
      } else if (!p.text.empty()) {
        out.push_back(std::move(p));
      }
    }
    for (PreToken& p : out) p.text = bytes_to_chars(p.text);
    pieces = std::move(out);
  }
};

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  std::string replacement;  // UTF-8 of the replacement character
  enum class Prepend { Always, First, Never } prepend = Prepend::Always;
  bool split = true;
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    std::vector<PreToken> out;
    for (PreToken& p : pieces) {
      std::string s;
      s.reserve(p.text.size() + replacement.size());
      for (char c : p.text) {
        if (c == ' ') s += replacement;
        else s.push_back(c);
      }
      bool starts = s.compare(0, replacement.size(), replacement) == 0;
      if (!starts && (prepend == Prepend::Always || (prepend == Prepend::First && p.at_input_start)))
        s.insert(0, replacement);
      PreToken q{std::move(s), p.at_input_start};
      if (!split) {
        if (!q.text.empty()) out.push_back(std::move(q));
        continue;
      }
      std::vector<Span> spans;
      size_t prev = 0;
      for (size_t pos = q.text.find(replacement); pos != std::string::npos;
           pos = q.text.find(replacement, pos + replacement.size())) {
        if (prev != pos) spans.push_back({prev, pos, false});
        spans.push_back({pos, pos + replacement.size(), true});
        prev = pos + replacement.size();
      }
      if (prev != q.text.size()) spans.push_back({prev, q.text.size(), false});
      split_spans(q, std::move(spans), Behavior::MergedWithNext, out);
    }
    pieces = std::move(out);
  }
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  std::vector<std::unique_ptr<PreTokenizer>> parts;
  void pre_tokenize(std::vector<PreToken>& pieces) const override {
    for (const auto& p : parts) p->pre_tokenize(pieces);
  }
};

}  // namespace

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const Json& v, const JsonPath& at) {
  at.check_depth();
  const std::string type = get_string(v, "type", at);
  const std::string where = *at.label + ": " + at.path;
  if (type == "Sequence") return make_sequence<SequencePreTokenizer>(v, "pretokenizers", at, make_pre_tokenizer);
  if (type == "ByteLevel") {
    auto p = std::make_unique<ByteLevelPreTokenizer>();
    p->add_prefix_space = opt_bool(v, "add_prefix_space", true, at);
    if (opt_bool(v, "use_regex", true, at)) p->regex = std::make_unique<Regex>(kGpt2Regex, where);
    return p;
  }
  if (type == "Split") {
    auto p = std::make_unique<SplitPreTokenizer>();
    p->pattern = Pattern::from_json(require(v, "pattern", at), at.child("pattern"));
    p->behavior = parse_behavior(get_string(v, "behavior", at), at.child("behavior"));
    p->invert = opt_bool(v, "invert", false, at);
    return p;
  }
  if (type == "Metaspace") {
    auto p = std::make_unique<MetaspacePreTokenizer>();
    utf8_append(p->replacement, get_char(v, "replacement", at));
    p->split = opt_bool(v, "split", true, at);
    if (auto scheme = opt_string(v, "prepend_scheme", at)) {
      if (*scheme == "always") p->prepend = MetaspacePreTokenizer::Prepend::Always;
      else if (*scheme == "first") p->prepend = MetaspacePreTokenizer::Prepend::First;
      else if (*scheme == "never") p->prepend = MetaspacePreTokenizer::Prepend::Never;
      else at.child("prepend_scheme").fail("\"" + *scheme + "\" is not always, first or never");
    } else {
      p->prepend = opt_bool(v, "add_prefix_space", true, at) ? MetaspacePreTokenizer::Prepend::Always
                                                               : MetaspacePreTokenizer::Prepend::Never;
    }
    return p;
  }
  if (type == "Digits") {
    auto p = std::make_unique<RegexSplitPreTokenizer>();
    p->regex = std::make_unique<Regex>("\\p{N}", where);
    p->behavior = opt_bool(v, "individual_digits", false, at) ? Behavior::Isolated : Behavior::Contiguous;
    return p;
  }
  if (type == "WhitespaceSplit") {
    auto p = std::make_unique<RegexSplitPreTokenizer>();
    p->regex = std::make_unique<Regex>("\\s", where);
    p->behavior = Behavior::Removed;
    return p;
  }
  if (type == "Whitespace") {
    auto p = std::make_unique<RegexSplitPreTokenizer>();
    p->regex = std::make_unique<Regex>("\\w+|[^\\w\\s]+", where);
    p->behavior = Behavior::Removed;
    p->invert = true;
    return p;
  }
  at.child("type").fail("\"" + type + "\" (pre_tokenizer) is not supported");
}

}  // namespace tpbatch::tok
