#pragma once
// Decoders of tokenizer.json: ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence.
// Each maps the list of token strings to a new list (HF `decode_chain`); the results are joined.
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/json_util.h"

namespace tpbatch::tok {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

std::unique_ptr<Decoder> make_decoder(const Json& v, const JsonPath& at);

}  // namespace tpbatch::tok
