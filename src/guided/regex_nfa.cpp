#include "guided/regex_nfa.h"

#include <bitset>
#include <memory>

namespace tpbatch::guided {
namespace {

// One character's worth of input: alternatives, each a sequence of byte ranges (a UTF-8
// character is up to four bytes).
using ByteSeq = std::vector<std::pair<uint8_t, uint8_t>>;

struct Node {
  enum Kind { kEmpty, kChar, kConcat, kAlt, kRepeat } kind = kEmpty;
  std::vector<ByteSeq> chars;                // kChar
  std::vector<std::unique_ptr<Node>> parts;  // kConcat, kAlt; kRepeat: one
  int64_t min = 0, max = -1;                 // kRepeat; max -1 = unbounded
};
using NodePtr = std::unique_ptr<Node>;

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

ByteSeq literal_seq(std::string_view bytes) {
  ByteSeq s;
  for (unsigned char b : bytes) s.push_back({b, b});
  return s;
}

// The ASCII characters not in `excluded`, as byte ranges.
std::vector<ByteSeq> ascii_not_in(const std::bitset<128>& excluded) {
  std::vector<ByteSeq> out;
  for (int c = 0; c < 128; ++c) {
    if (excluded[c]) continue;
    int e = c;
    while (e + 1 < 128 && !excluded[e + 1]) ++e;
    out.push_back({{static_cast<uint8_t>(c), static_cast<uint8_t>(e)}});
    c = e;
  }
  return out;
}

// Every character not in `excluded` (ASCII only): the other ASCII bytes, then any multi-byte
// UTF-8 character.
std::vector<ByteSeq> complement(const std::bitset<128>& excluded) {
  std::vector<ByteSeq> out = ascii_not_in(excluded);
  // Well-formed UTF-8 only (Unicode's table 3-7): no overlong forms, surrogates or code points past
  // U+10FFFF, so a byte-fallback token cannot start a sequence no text has.
  out.push_back({{0xC2, 0xDF}, {0x80, 0xBF}});
  out.push_back({{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}});
  out.push_back({{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}});
  out.push_back({{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}});
  out.push_back({{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}});
  out.push_back({{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}});
  out.push_back({{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}});
  out.push_back({{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}});
  return out;
}

class Parser {
 public:
  explicit Parser(std::string_view p) : p_(p) {}

  NodePtr parse() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    NodePtr n = alternation();
    if (i_ < p_.size()) fail("unbalanced ')'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw GuidedError("regex " + quoted() + ": " + why + " at offset " + std::to_string(i_));
  }
  std::string quoted() const {
    std::string s(p_.substr(0, 80));
    return "'" + s + (p_.size() > 80 ? "...'" : "'");
  }
  bool more() const { return i_ < p_.size(); }
  char peek() const { return p_[i_]; }

  NodePtr alternation() {
    auto alt = std::make_unique<Node>();
    alt->kind = Node::kAlt;
    alt->parts.push_back(concatenation());
    while (more() && peek() == '|') {
      ++i_;
      alt->parts.push_back(concatenation());
    }
    if (alt->parts.size() == 1) return std::move(alt->parts[0]);
    return alt;
  }

  NodePtr concatenation() {
    auto cat = std::make_unique<Node>();
    cat->kind = Node::kConcat;
    while (more() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && i_ + 1 == p_.size()) {  // the match is whole anyway
        ++i_;
        break;
      }
      cat->parts.push_back(quantified(atom()));
    }
    return cat;
  }

  bool read_int(int64_t& v) {
    size_t s = i_;
    v = 0;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 100000) fail("a repeat count over 100000");
      ++i_;
    }
    return i_ > s;
  }

  NodePtr quantified(NodePtr n) {
    while (more()) {
      int64_t lo, hi;
      const char c = peek();
      if (c == '*') lo = 0, hi = -1, ++i_;
      else if (c == '+') lo = 1, hi = -1, ++i_;
      else if (c == '?') lo = 0, hi = 1, ++i_;
      else if (c == '{') {
        const size_t save = i_++;
        if (!read_int(lo)) {  // a literal '{', as Python reads one that starts no repeat
          i_ = save;
          return n;
        }
        hi = lo;
        if (more() && peek() == ',') {
          ++i_;
          if (!read_int(hi)) hi = -1;
        }
        if (!more() || peek() != '}') fail("a repeat '{' without its '}'");
        ++i_;
        if (hi >= 0 && hi < lo) fail("a repeat {m,n} with n < m");
      } else {
        return n;
      }
      if (more() && (peek() == '?' || peek() == '+')) ++i_;  // lazy/possessive: the same set of matches
      auto r = std::make_unique<Node>();
      r->kind = Node::kRepeat;
      r->min = lo;
      r->max = hi;
      r->parts.push_back(std::move(n));
      n = std::move(r);
    }
    return n;
  }

  static NodePtr char_node(std::vector<ByteSeq> chars) {
    auto n = std::make_unique<Node>();
    n->kind = Node::kChar;
    n->chars = std::move(chars);
    return n;
  }

  // One UTF-8 character of the pattern itself, as its bytes.
  std::string utf8_char() {
    const unsigned char b = static_cast<unsigned char>(peek());
    const size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
    if (i_ + len > p_.size()) fail("invalid UTF-8");
    std::string s(p_.substr(i_, len));
    i_ += len;
    return s;
  }

  uint32_t hex(size_t digits) {
    if (i_ + digits > p_.size()) fail("a short hex escape");
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const char c = p_[i_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else fail("a bad hex digit");
    }
    return v;
  }

  // After a backslash: a class escape into `set` (ASCII), or a literal character's bytes.
  // Returns true for a class escape; `negated` is set for \D \W \S.
  bool escape(std::bitset<128>& set, bool& negated, std::string& literal) {
    if (!more()) fail("a trailing backslash");
    const char c = p_[i_++];
    negated = false;
    auto range = [&](int a, int b) { for (int k = a; k <= b; ++k) set[k] = true; };
    switch (c) {
      case 'd': case 'D': range('0', '9'); negated = c == 'D'; return true;
      case 'w': case 'W': range('0', '9'); range('a', 'z'); range('A', 'Z'); set['_'] = true; negated = c == 'W'; return true;
      case 's': case 'S': set[' '] = set['\t'] = set['\n'] = set['\r'] = set['\f'] = set['\v'] = true; negated = c == 'S'; return true;
      case 'n': literal = "\n"; return false;
      case 't': literal = "\t"; return false;
      case 'r': literal = "\r"; return false;
      case 'f': literal = "\f"; return false;
      case 'v': literal = "\v"; return false;
      case 'x': literal.clear(); append_utf8(hex(2), literal); return false;
      case 'u': literal.clear(); append_utf8(hex(4), literal); return false;
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
          fail(std::string("the escape '\\") + c + "' is not supported");
        --i_;
        literal = utf8_char();
        return false;
    }
  }

  NodePtr atom() {
    const char c = peek();
    if (c == '(') {
      ++i_;
      if (more() && peek() == '?') {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') i_ += 2;
        else fail("only (?:...) groups are supported (no lookaround, flags or named groups)");
      }
      NodePtr n = alternation();
      if (!more() || peek() != ')') fail("a '(' without its ')'");
      ++i_;
      return n;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      std::bitset<128> nl;
      nl['\n'] = true;
      return char_node(complement(nl));
    }
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '^' || c == '$') fail("anchors are supported only at the ends of the pattern");
    if (c == '\\') {
      ++i_;
      std::bitset<128> set;
      bool neg;
      std::string lit;
      if (!escape(set, neg, lit)) return char_node({literal_seq(lit)});
      return char_node(neg ? complement(set) : ascii_chars(set));
    }
    return char_node({literal_seq(utf8_char())});
  }

  static std::vector<ByteSeq> ascii_chars(const std::bitset<128>& set) {
    return ascii_not_in(~set);
  }

  NodePtr char_class() {
    ++i_;  // '['
    bool negated = false;
    if (more() && peek() == '^') negated = true, ++i_;
    std::bitset<128> set;
    std::vector<std::string> wide;  // non-ASCII members
    bool first = true;
    while (true) {
      if (!more()) fail("a '[' without its ']'");
      if (peek() == ']' && !first) break;
      first = false;
      std::string lo;
      if (peek() == '\\') {
        ++i_;
        bool neg;
        std::bitset<128> esc;
        if (escape(esc, neg, lo)) {
          if (neg) fail("a negated class escape (\\D \\W \\S) inside [...]");
          set |= esc;
          continue;
        }
      } else {
        lo = utf8_char();
      }
      if (more() && peek() == '-' && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        std::string hi;
        if (peek() == '\\') {
          ++i_;
          bool neg;
          std::bitset<128> esc;
          if (escape(esc, neg, hi)) fail("a class escape as a range's end");
        } else {
          hi = utf8_char();
        }
        if (lo.size() != 1 || hi.size() != 1) fail("a range of non-ASCII characters in [...]");
        if (hi[0] < lo[0]) fail("a range with its ends reversed");
        for (int k = lo[0]; k <= hi[0]; ++k) set[k] = true;
      } else if (lo.size() == 1) {
        set[static_cast<unsigned char>(lo[0])] = true;
      } else {
        wide.push_back(lo);
      }
    }
    ++i_;  // ']'
    if (negated) {
      if (!wide.empty()) fail("a non-ASCII character in a negated class");
      return char_node(complement(set));
    }
    std::vector<ByteSeq> chars = ascii_chars(set);
    for (const std::string& w : wide) chars.push_back(literal_seq(w));
    return char_node(std::move(chars));
  }

  std::string_view p_;
  size_t i_ = 0;
};

class Builder {
 public:
  Builder(Nfa& nfa, int64_t max_states) : nfa_(nfa), max_(max_states) {}

  int32_t add() {
    if (static_cast<int64_t>(nfa_.states.size()) >= max_)
      throw GuidedError("the constraint is too large (over " + std::to_string(max_) + " automaton states)");
    nfa_.states.emplace_back();
    return static_cast<int32_t>(nfa_.states.size() - 1);
  }

  // Builds n between `from` and a new end state; returns the end.
  int32_t build(const Node& n, int32_t from) {
    switch (n.kind) {
      case Node::kEmpty: return from;
      case Node::kChar: {
        const int32_t end = add();
        for (const ByteSeq& seq : n.chars) {
          int32_t at = from;
          for (size_t k = 0; k < seq.size(); ++k) {
            const int32_t to = k + 1 == seq.size() ? end : add();
            nfa_.states[at].edges.push_back({seq[k].first, seq[k].second, to});
            at = to;
          }
        }
        return end;
      }
      case Node::kConcat: {
        int32_t at = from;
        for (const auto& p : n.parts) at = build(*p, at);
        return at;
      }
      case Node::kAlt: {
        const int32_t end = add();
        for (const auto& p : n.parts) {
          const int32_t s = add();
          nfa_.states[from].epsilon.push_back(s);
          const int32_t e = build(*p, s);
          nfa_.states[e].epsilon.push_back(end);
        }
        return end;
      }
      case Node::kRepeat: {
        const Node& body = *n.parts[0];
        int32_t at = from;
        for (int64_t k = 0; k < n.min; ++k) at = build(body, at);
        if (n.max < 0) {  // at (body at)*
          const int32_t loop = add();
          nfa_.states[at].epsilon.push_back(loop);
          const int32_t e = build(body, loop);
          nfa_.states[e].epsilon.push_back(loop);
          return loop;
        }
        const int32_t end = add();
        nfa_.states[at].epsilon.push_back(end);
        for (int64_t k = n.min; k < n.max; ++k) {
          at = build(body, at);
          nfa_.states[at].epsilon.push_back(end);
        }
        return end;
      }
    }
    return from;
  }

 private:
  Nfa& nfa_;
  int64_t max_;
};

}  // namespace

Nfa compile_regex(std::string_view pattern, int64_t max_states) {
  NodePtr root = Parser(pattern).parse();
  Nfa nfa;
  Builder b(nfa, max_states);
  nfa.start = b.add();
  nfa.accept = b.build(*root, nfa.start);
  return nfa;
}

std::string regex_escape(std::string_view text) {
  static const std::string_view meta = "\\.^$|?*+()[]{}-/";
  std::string out;
  for (char c : text) {
    if (meta.find(c) != std::string_view::npos) out += '\\';
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  return out;
}

}  // namespace tpbatch::guided
