// libFuzzer target: tpbatch::parse_input_row on one arbitrary JSONL line. The first byte picks the
// job settings (text or tokens field, generate or score, vocabulary size); the rest is the line.
// Expected: an InputRow or tpbatch::BadLine naming the line. Anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "common/error.h"
#include "io/input_row.h"
#include "job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  std::string_view line(reinterpret_cast<const char*>(data + 1), size - 1);
  tpbatch::JobSpec job;
  job.input.path = "in.jsonl";
  if (mode & 1) job.input.tokens_field = "ids";
  if (mode & 2) job.task = tpbatch::Task::kScore;
  if (mode & 4) job.input.id_field = "prompt";  // the id and the text from one field
  const int64_t vocab = (mode & 8) ? 0 : (mode & 16) ? 32000 : 512;
  const int64_t index = (mode >> 5) * 1000;
  try {
    tpbatch::InputRow row = tpbatch::parse_input_row(line, index, job, vocab);
    if (row.index != index) std::abort();
    if (job.input.tokens_field && (!row.tokens || row.tokens->empty())) std::abort();
    if (row.tokens) {  // tokens_field's, or an OpenAI request's token-id prompt
      for (int32_t id : *row.tokens)
        if (id < 0 || (vocab > 0 && id >= vocab)) std::abort();
    } else if (!row.text && !row.messages_json) {  // a prompt, or chat messages to render
      std::abort();
    }
    const auto& s = row.sampling;
    if (s.max_new_tokens < 0 || s.temperature < 0 || s.top_k < 0 || !(s.top_p > 0 && s.top_p <= 1)) std::abort();
    for (const auto& st : s.stop)
      if (st.empty()) std::abort();
  } catch (const tpbatch::BadLine& bad) {
    const std::string want = "input line " + std::to_string(index + 1) + ": ";
    if (bad.index != index || bad.reason.rfind(want, 0) != 0) std::abort();  // the message names the line
  }
  return 0;
}
