#pragma once
// Normalizers of tokenizer.json: Sequence, Prepend, Replace, NFC/NFD/NFKC/NFKD, Lowercase, Strip.
#include <memory>
#include <string>
#include <string_view>

#include "tokenizer/json_util.h"

namespace tpbatch::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string s) const = 0;
};

// Throws tpbatch::Error naming an unknown "type".
std::unique_ptr<Normalizer> make_normalizer(const Json& v, const JsonPath& at);

}  // namespace tpbatch::tok
