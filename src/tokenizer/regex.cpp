#include "tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace tpbatch::tok {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
};

namespace {

// Per-thread match resources: a JIT stack large enough for long runs of whitespace.
struct ThreadMatchState {
  pcre2_match_context* ctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  ThreadMatchState() {
    ctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (ctx && stack) pcre2_jit_stack_assign(ctx, nullptr, stack);
  }
  ~ThreadMatchState() {
    if (stack) pcre2_jit_stack_free(stack);
    if (ctx) pcre2_match_context_free(ctx);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

Regex::Regex(const std::string& pattern, const std::string& where) : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE off = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(err, buf, sizeof buf);
    throw Error(where + ": invalid regex \"" + pattern + "\" at offset " + std::to_string(off) + ": " +
                reinterpret_cast<const char*>(buf));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
  if (impl_ && impl_->code) pcre2_code_free(impl_->code);
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::string_view subject) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (!md) return out;
  ThreadMatchState& ts = thread_state();
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  size_t pos = 0;
  while (pos <= subject.size()) {
    int rc = pcre2_match(impl_->code, s, subject.size(), pos, 0, md, ts.ctx);
    if (rc < 0) break;  // no match, or a resource limit: the rest stays unmatched
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t a = ov[0], b = ov[1];
    if (b < a || b > subject.size()) break;
    out.emplace_back(a, b);
    if (b == a) {
      if (a >= subject.size()) break;
      pos = a + utf8_char_len(subject, a);
    } else {
      pos = b;
    }
  }
  pcre2_match_data_free(md);
  return out;
}

std::string Regex::escape(std::string_view literal) {
  // \Q...\E would break on a literal "\E"; escape each non-alphanumeric ASCII byte instead.
  std::string out;
  for (char c : literal) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) {
      if (u < 0x20 || u == 0x7F) {
        static const char* hex = "0123456789abcdef";
        out += "\\x{";
        out.push_back(hex[u >> 4]);
        out.push_back(hex[u & 15]);
        out += "}";
        continue;
      }
      out.push_back('\\');
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace tpbatch::tok
