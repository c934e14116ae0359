#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/pattern.h"
#include "tokenizer/utf8.h"

namespace tpbatch::tok {

namespace {

class SequenceDecoder : public Decoder {
 public:
  std::vector<std::unique_ptr<Decoder>> parts;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& p : parts) p->decode_chain(tokens);
  }
};

class ByteLevelDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string mapped;
      bool ok = true;
      for (size_t i = 0; i < t.size();) {
        size_t n = utf8_valid_len(t, i);
        if (!n) { ok = false; break; }
        auto b = char_to_byte(utf8_decode(t, i, n));
        if (!b) { ok = false; break; }
        mapped.push_back(static_cast<char>(*b));
        i += n;
      }
      bytes += ok ? mapped : t;
    }
    tokens.assign(1, utf8_lossy(bytes));
  }
};

class ReplaceDecoder : public Decoder {
 public:
  Pattern pattern;
  std::string content;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = pattern.replace_all(t, content);
  }
};

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class ByteFallbackDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    out.reserve(tokens.size());
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (utf8_is_valid(pending)) out.push_back(pending);
      else
        for (size_t k = 0; k < pending.size(); ++k) out.emplace_back(kReplacementChar);
      pending.clear();
    };
    for (std::string& t : tokens) {
      int hi = -1, lo = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        hi = hex_value(t[3]);
        lo = hex_value(t[4]);
      }
      if (hi >= 0 && lo >= 0) {
        pending.push_back(static_cast<char>(hi * 16 + lo));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }
};

class FuseDecoder : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

class StripDecoder : public Decoder {
 public:
  std::string content;  // one character
  size_t start = 0, stop = 0;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      size_t a = 0;
      for (size_t k = 0; k < start && a + content.size() <= t.size() && t.compare(a, content.size(), content) == 0; ++k)
        a += content.size();
      size_t b = t.size();
      for (size_t k = 0; k < stop && b >= a + content.size() &&
                         t.compare(b - content.size(), content.size(), content) == 0; ++k)
        b -= content.size();
      t = t.substr(a, b - a);
    }
  }
};

class MetaspaceDecoder : public Decoder {
 public:
  std::string replacement;
  bool prepend = true;
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      std::string out;
      for (size_t pos = 0; pos < t.size();) {
        if (t.compare(pos, replacement.size(), replacement) == 0) {
          if (!(i == 0 && prepend)) out.push_back(' ');
          pos += replacement.size();
        } else {
          out.push_back(t[pos++]);
        }
      }
      t = std::move(out);
    }
  }
};

}  // namespace

std::unique_ptr<Decoder> make_decoder(const Json& v, const JsonPath& at) {
  at.check_depth();
  const std::string type = get_string(v, "type", at);
  if (type == "Sequence") return make_sequence<SequenceDecoder>(v, "decoders", at, make_decoder);
  if (type == "ByteLevel") return std::make_unique<ByteLevelDecoder>();
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    d->pattern = Pattern::from_json(require(v, "pattern", at), at.child("pattern"));
    d->content = get_string(v, "content", at);
    return d;
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallbackDecoder>();
  if (type == "Fuse") return std::make_unique<FuseDecoder>();
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    utf8_append(d->content, get_char(v, "content", at));
    int64_t s = opt_int(v, "start", at).value_or(0), e = opt_int(v, "stop", at).value_or(0);
    if (s < 0 || e < 0) at.fail("start and stop must not be negative");
    d->start = static_cast<size_t>(s);
    d->stop = static_cast<size_t>(e);
    return d;
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    utf8_append(d->replacement, get_char(v, "replacement", at));
    if (auto scheme = opt_string(v, "prepend_scheme", at)) d->prepend = *scheme != "never";
    else d->prepend = opt_bool(v, "add_prefix_space", true, at);
    return d;
  }
  at.child("type").fail("\"" + type + "\" (decoder) is not supported");
}

}  // namespace tpbatch::tok
