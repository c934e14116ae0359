#include "tokenizer/normalizer.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#include <unicode/locid.h>

#include <vector>

#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace tpbatch::tok {

namespace {

class SequenceNormalizer : public Normalizer {
 public:
  std::vector<std::unique_ptr<Normalizer>> parts;
  std::string normalize(std::string s) const override {
    for (const auto& p : parts) s = p->normalize(std::move(s));
    return s;
  }
};

class PrependNormalizer : public Normalizer {
 public:
  std::string prepend;
  std::string normalize(std::string s) const override {
    if (s.empty()) return s;
    return prepend + s;
  }
};

class ReplaceNormalizer : public Normalizer {
 public:
  Pattern pattern;
  std::string content;
  std::string normalize(std::string s) const override { return pattern.replace_all(s, content); }
};

// Applies `fn` to each maximal run of valid UTF-8; invalid bytes pass through unchanged.
template <typename Fn>
std::string on_valid_runs(const std::string& s, Fn fn) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    while (j < s.size()) {
      size_t n = utf8_valid_len(s, j);
      if (!n) break;
      j += n;
    }
    if (j > i) out += fn(std::string_view(s).substr(i, j - i));
    if (j < s.size()) out.push_back(s[j++]);  // one invalid byte
    i = j;
  }
  return out;
}

class UnicodeNormalizer : public Normalizer {
 public:
  const icu::Normalizer2* norm = nullptr;
  std::string normalize(std::string s) const override {
    if (!norm) return s;
    return on_valid_runs(s, [&](std::string_view run) {
      UErrorCode st = U_ZERO_ERROR;
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(run.data(), static_cast<int32_t>(run.size())));
      if (norm->isNormalized(u, st) && U_SUCCESS(st)) return std::string(run);
      st = U_ZERO_ERROR;
      icu::UnicodeString r = norm->normalize(u, st);
      if (U_FAILURE(st)) return std::string(run);
      std::string out;
      r.toUTF8String(out);
      return out;
    });
  }
};

// As Rust's char::to_lowercase applied to each character on its own (no final-sigma context).
class LowercaseNormalizer : public Normalizer {
 public:
  std::string normalize(std::string s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      const auto b = static_cast<unsigned char>(s[i]);
      if (b < 0x80) {
        out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
        ++i;
        continue;
      }
      const size_t n = utf8_valid_len(s, i);
      if (!n) {
        out.push_back(s[i++]);
        continue;
      }
      icu::UnicodeString u(static_cast<UChar32>(utf8_decode(s, i, n)));
      u.toLower(icu::Locale::getRoot());
      u.toUTF8String(out);
      i += n;
    }
    return out;
  }
};

class StripNormalizer : public Normalizer {
 public:
  bool left = true, right = true;
  std::string normalize(std::string s) const override {
    size_t a = 0, b = s.size();
    if (left) {
      while (a < b) {
        size_t n = utf8_valid_len(s, a);
        if (!n || !is_unicode_whitespace(utf8_decode(s, a, n))) break;
        a += n;
      }
    }
    if (right) {
      while (b > a) {
        size_t k = b - 1;
        while (k > a && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80 && b - k < 4) --k;
        size_t n = utf8_valid_len(s, k);
        if (n != b - k || !is_unicode_whitespace(utf8_decode(s, k, n))) break;
        b = k;
      }
    }
    return s.substr(a, b - a);
  }
};

const icu::Normalizer2* icu_normalizer(const std::string& type) {
  UErrorCode st = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (type == "NFC") n = icu::Normalizer2::getNFCInstance(st);
  else if (type == "NFD") n = icu::Normalizer2::getNFDInstance(st);
  else if (type == "NFKC") n = icu::Normalizer2::getNFKCInstance(st);
  else if (type == "NFKD") n = icu::Normalizer2::getNFKDInstance(st);
  return U_SUCCESS(st) ? n : nullptr;
}

}  // namespace

std::unique_ptr<Normalizer> make_normalizer(const Json& v, const JsonPath& at) {
  at.check_depth();
  const std::string type = get_string(v, "type", at);
  if (type == "Sequence") return make_sequence<SequenceNormalizer>(v, "normalizers", at, make_normalizer);
  if (type == "Prepend") {
    auto p = std::make_unique<PrependNormalizer>();
    p->prepend = get_string(v, "prepend", at);
    return p;
  }
  if (type == "Replace") {
    auto p = std::make_unique<ReplaceNormalizer>();
    p->pattern = Pattern::from_json(require(v, "pattern", at), at.child("pattern"));
    p->content = get_string(v, "content", at);
    return p;
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    auto p = std::make_unique<UnicodeNormalizer>();
    p->norm = icu_normalizer(type);
    if (!p->norm) at.fail("normalizer " + type + " is not available (ICU data missing)");
    return p;
  }
  if (type == "Lowercase") return std::make_unique<LowercaseNormalizer>();
  if (type == "Strip") {
    auto p = std::make_unique<StripNormalizer>();
    p->left = opt_bool(v, "strip_left", true, at);
    p->right = opt_bool(v, "strip_right", true, at);
    return p;
  }
  at.child("type").fail("\"" + type + "\" (normalizer) is not supported");
}

}  // namespace tpbatch::tok
