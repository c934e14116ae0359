#pragma once
// One JSONL line of the input, parsed. Streaming: lines are read one at a time, never the whole file.
#include <cstdint>
#include <deque>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "job/job_spec.h"

namespace tpbatch {

struct InputRow {
  int64_t index = 0;                           // 0-based line number
  std::string id;                              // id_field's value as text, else the line number
  std::optional<std::string> text;             // text_field
  std::optional<std::vector<int32_t>> tokens;  // tokens_field
  std::optional<std::string> messages_json;    // "messages" (OpenAI chat format), validated, as JSON text
  std::optional<std::string> chat_template_kwargs;  // a messages row's own template variables, as JSON text
  std::optional<std::string> completion;       // score task: completion_field
  std::optional<std::vector<int32_t>> completion_tokens;  // score task: "completion_tokens" (ids)
  SamplingParams sampling;                     // job defaults with this line's overrides applied
};

// Thrown for a line that cannot be used; what() names the line (1-based in messages) and reason.
struct BadLine {
  int64_t index;
  std::string id;       // best effort: the line number when the id could not be read
  std::string reason;   // the whole message, line included: "input line 7: not valid JSON (...)"
  const std::string& what() const { return reason; }
};

// Parses one line. Per-line overrides: per_line_sampling_names() (job/sampling_keys.h); a key that
// is neither one of these nor a field the job reads is an error row unless input.unknown_keys:
// ignore. Fields: id_field, text_field (or
// tokens_field, or "messages" with its "chat_template_kwargs"), and for the score task
// completion_field or "completion_tokens".
// Throws BadLine: not JSON, not an object, invalid UTF-8, missing/mistyped field, bad override
// value, token id outside [0, vocab_size), a key the job does not read (input.unknown_keys: error).
InputRow parse_input_row(std::string_view line, int64_t index, const JobSpec& job, int64_t vocab_size);

// The id the rows of a line get (an OpenAI request's custom_id, else the id_field's value, else the
// 0-based line index), as parse_input_row reads it; for a line a run has not reached (export names
// the rows it never finished). A line too broken to read gives its index.
std::string input_line_id(std::string_view line, int64_t index, const std::string& id_field);

// Reads lines one by one; a final line without '\n' counts; blank lines at the end of the file do not
// (a blank line followed by a non-blank one is a row, and a bad line).
class JsonlReader {
 public:
  explicit JsonlReader(const std::string& path);   // throws Error naming the path
  bool next(std::string& line);                     // false at end of file
  int64_t lines_read() const { return lines_; }       // rows returned so far
 private:
  bool read_physical(std::string& line);           // one line, '\r' stripped, BOM removed
  std::ifstream in_;
  std::string path_;
  int64_t lines_ = 0;
  int64_t physical_ = 0;
  std::deque<std::string> queue_;                  // blank lines (and the line after them) held back
};

// JSON nested deeper than this is a bad line: parsing, copying and printing a JSON value recurse once
// per level, and a line of 100,000 '[' would overflow the stack. Real rows nest a few levels.
inline constexpr int64_t kMaxJsonDepth = 512;
// The deepest nesting of arrays and objects in a JSON text (strings skipped), stopping early once
// past `stop_above`.
int64_t json_nesting_depth(std::string_view text, int64_t stop_above = kMaxJsonDepth);

// A line with nothing but spaces, tabs or '\r' (an empty JSONL row; at the end of file, not a row).
bool is_blank_line(std::string_view line);

int64_t count_jsonl_rows(const std::string& path);  // same counting rule as JsonlReader

// How many results rows a line has: for task generate its "n" (an OpenAI request's body.n) when that
// is a valid sample count, else the job's sampling.n; 1 for the other tasks (their "n" is an error
// row). A line that is bad in any way has that many rows too, each an error row (parse_input_row
// says why), so the count never depends on more than this.
int64_t samples_of_line(std::string_view line, const JobSpec& job);

// "<bytes>:<FNV-1a 64 of the contents, hex>": identifies an input file for resume.
std::string input_fingerprint(const std::string& path);
// True when the file at `path` begins with exactly the bytes `fingerprint` identifies, ending at a
// line's end, and has more after them: an input that grew by appended lines.
bool input_grew_from(const std::string& path, const std::string& fingerprint);

}  // namespace tpbatch
