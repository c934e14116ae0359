#pragma once
// A compiled PCRE2 pattern (UTF + UCP, JIT when available) with an iterator over matches.
// Immutable after construction and safe to share between threads.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tpbatch::tok {

class Regex {
 public:
  // Throws tpbatch::Error ("<where>: invalid regex ...") when the pattern does not compile.
  Regex(const std::string& pattern, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // All non-overlapping matches as (start, end) byte offsets, left to right. An empty match is
  // reported and the search moves on by one character. Invalid UTF-8 never matches.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view subject) const;

  static std::string escape(std::string_view literal);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tpbatch::tok
