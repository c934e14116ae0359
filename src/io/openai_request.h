#pragma once
// An OpenAI Batch API request line ({"custom_id", "method", "url", "body"}) as the plain input row
// it asks for, which parse_input_row then reads like any other line.
#include <string>

#include <nlohmann/json.hpp>

#include "io/line_context.h"
#include "job/job_spec.h"

namespace tpbatch {

// Where a /v1/embeddings request's token-id input waits, in the converted row, for parse_input_row
// (a name no input line can use: it starts with a NUL).
extern const std::string kOpenAiInputIds;
// The same for a /v1/completions request's token-id prompt.
extern const std::string kOpenAiPromptIds;

// The row a request asks for; ctx.id becomes its custom_id. Refuses the line (ctx.bad) for a bad
// request, and under input.unknown_keys: error for a key it does not read.
nlohmann::json openai_request_to_row(const nlohmann::json& req, const JobSpec& job, LineContext& ctx);

}  // namespace tpbatch
