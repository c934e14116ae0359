#pragma once
// Admission of input lines into a replica: each line becomes a tokenized Sequence ready for the
// scheduler, or a finished RowResult right away (an error row, or a row with nothing to compute).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/sequence.h"
#include "engine/work_source.h"
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

  // nullptr when the row is already finished; its result is then appended to `immediate`.
  std::unique_ptr<Sequence> admit(const WorkItem& item, std::vector<RowResult>& immediate);

 private:
  const JobSpec& job_;
  const Tokenizer& tok_;
  const ModelConfig& cfg_;
};

}  // namespace tpbatch
