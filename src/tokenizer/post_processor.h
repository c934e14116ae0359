#pragma once
// Post-processors of tokenizer.json for a single sequence: TemplateProcessing, ByteLevel (no-op
// on ids), BertProcessing, RobertaProcessing, Sequence.
#include <cstdint>
#include <memory>
#include <vector>

#include "tokenizer/json_util.h"

namespace tpbatch::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual void process(std::vector<int32_t>& ids, bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const Json& v, const JsonPath& at);

}  // namespace tpbatch::tok
