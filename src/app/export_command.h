#pragma once
// `tpbatch export RESULTS.h5 --format openai|jsonl [--output FILE] [--input FILE.jsonl]`: one JSON
// line per row of a results file, in input order.
//   openai: the OpenAI Batch API output file ({"id", "custom_id", "response": {"status_code",
//     "request_id", "body": a text_completion or chat.completion}, "error"}); the kind of body and
//     its "model" follow each input line's url and body.model (the input file is the job's
//     input.path unless --input names it); rows that failed get status_code 400 and an error body,
//     rows the job has not finished get "response": null and an error.
//   jsonl: every dataset of the row (id, done, finish_reason, error, prompt_tokens, output_tokens,
//     output_text, output_logprobs, logprob_sum, is_greedy).
#include <ostream>
#include <string>

namespace tpbatch {

struct ExportOptions {
  std::string results;
  std::string format = "jsonl";  // openai | jsonl
  std::string output;            // empty: standard output
  std::string input;             // empty: the job's input.path
};

int run_export(const ExportOptions& o, std::ostream& out);

}  // namespace tpbatch
