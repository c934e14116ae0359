#pragma once
// Admission of input lines into a replica: each line becomes a tokenized Sequence ready for the
// scheduler, or a finished RowResult right away (an error row, or a row with nothing to compute).
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "engine/reasoning_budget.h"
#include "engine/score_tokens.h"
#include "engine/sequence.h"
#include "engine/work_source.h"
#include "guided/constraint.h"
#include "io/input_row.h"
#include "io/row_result.h"
#include "job/job_spec.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace tpbatch {

// A row that failed before (or instead of) running: finish_reason "error" and the reason.
RowResult error_row(int64_t index, const std::string& id, const std::string& why);

// A finished (or failed) sequence as the writer stores it; logprobs: keep per-token logprobs.
RowResult to_result(const Sequence& s, bool logprobs);

// Turns an input line into a sequence, or an error row. Bad lines end the job under on_bad_line: fail.
class RowAdmitter {
 public:
  RowAdmitter(const JobSpec& job, const Tokenizer& tok, const ModelConfig& cfg) : job_(job), tok_(tok), cfg_(cfg) {}

  // The line's sequences, one per sample item.samples asks for, appended to `admitted`; or, when
  // the line is finished already (an error row, nothing to compute), its results to `immediate`.
  void admit(const WorkItem& item, std::vector<std::unique_ptr<Sequence>>& admitted,
             std::vector<RowResult>& immediate);

  // The replica's KV cache in tokens: a generate row is bounded by it (finish_reason length, with
  // a warning) as by the model's context. 0 = unknown (no bound but the context).
  void set_kv_capacity_tokens(int64_t tokens) { kv_capacity_ = tokens; }

 private:
  // The chat template for "messages" rows, loaded at the first such row; nullptr (and
  // chat_error_ says why) when the model has none or it does not parse.
  const chat::ChatTemplate* chat_template();
  // The job's reasoning parser, auto resolved from the chat template at the first generate row.
  Reasoning reasoning_parser();
  // s.think tracked for a row with a thinking budget or a reasoning parser; LineRefused when the
  // row has a budget the tokenizer cannot keep (no single <think> / </think> tokens).
  void start_think_tracking(Sequence& s);
  // Sample 0 of the line (row = line), or nullptr with its one result appended to `immediate`.
  std::unique_ptr<Sequence> admit_line(const WorkItem& item, std::vector<RowResult>& immediate);
  // The steps of admit_line.
  struct Prompt {
    std::optional<std::string> text;  // none: the row gave token ids
    bool add_bos = true;
  };
  Prompt render(const InputRow& row);
  // The prompt's tokens into s (prompt_len set); returns a score row's completion tokens.
  std::vector<int32_t> tokenize(const InputRow& row, const Prompt& prompt, Sequence& s);
  void admit_embed(Sequence& s);
  void admit_score(const InputRow& row, std::vector<int32_t> completion, Sequence& s);
  void admit_generate(const InputRow& row, Sequence& s);

  const JobSpec& job_;
  const Tokenizer& tok_;
  const ModelConfig& cfg_;
  // input.truncate: left: drops `count` tokens from the front of s's prompt, warning once.
  void truncate_front(Sequence& s, int64_t count, int64_t limit, const char* what);
  // A generate row's length bound: min(prompt + max_new_tokens, context, KV cache), warning once
  // when it is below what the row asks for.
  int64_t generation_limit(Sequence& s, int64_t max_new_tokens);

  int64_t kv_capacity_ = 0;
  bool warned_truncate_ = false, warned_context_ = false;
  bool chat_loaded_ = false;
  std::optional<Reasoning> reasoning_;
  std::optional<std::optional<ThinkTokens>> think_;  // looked up at the first row with a budget
  std::optional<chat::ChatTemplate> chat_;
  std::string chat_error_;
  // Compiled constraints by content, made at the first constrained row.
  std::unique_ptr<guided::ConstraintCache> constraints_;
};

}  // namespace tpbatch
