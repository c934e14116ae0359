#pragma once
// The `pattern` of Replace / Split components: {"String": "..."} (a literal) or {"Regex": "..."}.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/json_util.h"
#include "tokenizer/regex.h"

namespace tpbatch::tok {

struct Span {
  size_t start, end;
  bool is_match;
};

class Pattern {
 public:
  static Pattern from_json(const Json& v, const JsonPath& at);
  // The whole of s cut into matched and unmatched spans, in order (as HF `find_matches`).
  // An empty s gives one empty unmatched span.
  std::vector<Span> find_matches(std::string_view s) const;
  // Every match replaced by `content`.
  std::string replace_all(std::string_view s, std::string_view content) const;

 private:
  std::string literal_;
  std::shared_ptr<const Regex> regex_;
};

}  // namespace tpbatch::tok
