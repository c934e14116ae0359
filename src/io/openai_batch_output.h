#pragma once
// The OpenAI Batch API output file, written from a results file's rows (the request side, the
// input file, is input_row.h's): one line per input line, {"id", "custom_id", "response":
// {"status_code", "request_id", "body"}, "error"}. The body is a text_completion or chat.completion
// (its kind and "model" follow the input line's url and body.model), or, for an embed job, a
// /v1/embeddings list. A line's further samples (sampling.n > 1) are more choices of its one body.
// Rows that failed get status_code 400 and an error body; rows the job did not finish
// "response": null, an error, and their input line's custom_id, so they can be sent again.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "io/input_row.h"
#include "io/row_result.h"
#include "job/job_spec.h"
#include "tokenizer/tokenizer.h"

namespace tpbatch {

// The strings of token ids in the logprobs: each token's own text, decoded with the model's
// tokenizer, and its UTF-8 bytes; when no tokenizer.json of the places given can be read,
// "token_id:<id>" (vLLM's return_tokens_as_token_ids) and no bytes, said once on standard error.
// The tokenizer is loaded on first use: exports without logprobs never read it.
class TokenNames {
 public:
  // Model folders to try, in order, each with how it was found.
  explicit TokenNames(std::vector<std::pair<std::string, std::string>> model_dirs) : dirs_(std::move(model_dirs)) {}
  std::string text(int32_t id);
  nlohmann::ordered_json bytes(const std::string& text);  // null without a tokenizer

 private:
  const Tokenizer* tokenizer();
  std::vector<std::pair<std::string, std::string>> dirs_;
  std::unique_ptr<Tokenizer> tok_;
  bool tried_ = false;
};

// What every output line shares: the job's, and its results file's.
struct OpenAIBatchJob {
  std::string job_id;      // request ids batch_req_<job_id>-<line> ("": batch_req_<line>, an older file)
  std::string model_name;  // body.model for lines whose request names none
  int64_t created = 0;     // every body's "created"
  bool embed = false;      // task: embed
  bool samples = false;    // lines may have several rows (/input_line, /sample)
  JobSpec sample_job;      // what samples_of_line reads: the task and sampling.n
  std::string id_field = "id";  // input.id_field: custom_id of a row never finished
  bool reasoning = false;  // the job split /reasoning_text off: every choice has reasoning_content
};

// Takes the results rows in order, each with its input line, and writes the output lines.
class OpenAIBatchOutput {
 public:
  OpenAIBatchOutput(OpenAIBatchJob job, JsonlReader& input, TokenNames& names, std::ostream& out)
      : job_(std::move(job)), input_(input), names_(names), out_(out) {}
  void add(const RowResult& row, bool done);
  void finish();  // writes the last line

 private:
  void start_line(const RowResult& row, bool done);
  void add_sample(const RowResult& row, bool done);
  void write_pending();

  OpenAIBatchJob job_;
  JsonlReader& input_;
  TokenNames& names_;
  std::ostream& out_;
  nlohmann::ordered_json pending_;  // the current input line's output, written once its samples are in
  int64_t samples_left_ = 0;        // rows of the pending line still to come
  bool pending_chat_ = false;
};

}  // namespace tpbatch
