#pragma once
// `tpbatch export RESULTS.h5 --format openai|jsonl [--output FILE] [--input FILE.jsonl]`: one JSON
// line per row of a results file, in input order.
//   openai: the OpenAI Batch API output file ({"id", "custom_id", "response": {"status_code",
//     "request_id", "body": a text_completion or chat.completion}, "error"}); the kind of body and
//     its "model" follow each input line's url and body.model. The input file is --input, else the
//     first of: where the job read it (root attribute input_path), the job's input.path, where it
//     lay relative to the job's output.path (a moved job folder), its name beside the results file
//     -- that holds the file the rows were computed from (input_fingerprint); stderr says which.
//     Ids are batch_req_<job_id>-<line> (results_reader.h job_id). Rows that failed get
//     status_code 400 and an error body, rows the job has not finished "response": null, an error
//     and their input line's custom_id. Logprob tokens are their text and UTF-8 bytes, decoded with
//     the model folder's tokenizer (token_id:<id> without it, said once on stderr).
//   jsonl: every dataset of the row (id, done, finish_reason, error, prompt_tokens, output_tokens,
//     output_text, output_logprobs, logprob_sum, is_greedy).
#include <ostream>
#include <string>

namespace tpbatch {

struct ExportOptions {
  std::string results;
  std::string format = "jsonl";  // openai | jsonl
  std::string output;            // empty: standard output
  std::string input;             // empty: found from the results file (see openai above)
};

int run_export(const ExportOptions& o, std::ostream& out);

}  // namespace tpbatch
