// JSONL input: streaming reader, row counting and per-line parsing. See docs/job.md "Input".
#include "io/input_row.h"

#include <algorithm>
#include <filesystem>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <vector>
#include <limits>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "io/line_context.h"
#include "io/line_sampling.h"
#include "io/openai_request.h"
#include "io/row_chat.h"
#include "job/sampling_keys.h"
#include "tokenizer/utf8.h"

namespace tpbatch {
namespace {

using json = nlohmann::json;

std::string json_error_detail(const std::string& what) {
  std::string d = what;
  auto br = d.find("] ");
  if (d.rfind("[json.exception", 0) == 0 && br != std::string::npos) d = d.substr(br + 2);
  const std::string prefix = "parse error at line 1, ";
  if (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
  if (d.size() > 200) d = d.substr(0, 197) + "...";
  return d;
}

// A line's sample count as samples_of_line() reads it: the line's own valid "n" (or body.n), else
// the job's. Kept in step with apply_line_sampling and the OpenAI body mapping.
int64_t line_samples(const json& obj, int64_t job_n) {
  const json* v = nullptr;
  if (obj.contains("custom_id") && obj.contains("body")) {
    if (const auto b = obj.find("body"); b->is_object())
      if (const auto n = b->find("n"); n != b->end()) v = &*n;
  } else if (const auto n = obj.find("n"); n != obj.end()) {
    v = &*n;
  }
  int64_t x;
  if (v && !v->is_null() && json_as_int64(*v, x) && x >= 1 && x <= kMaxSamples) return x;
  return job_n;
}

// The row's token ids, each in [0, vocab_size) (vocab_size 0: any int32 >= 0).
std::vector<int32_t> token_ids(const json& list, const std::string& field, const LineContext& ctx,
                               int64_t vocab_size) {
  std::vector<int32_t> tokens;
  tokens.reserve(list.size());
  for (const auto& t : list) {
    int64_t id;
    if (!json_as_int64(t, id)) {
      if (t.is_number_integer()) ctx.bad("token id " + t.dump() + " out of range [0, " + std::to_string(vocab_size) + ")");
      ctx.bad("'" + field + "' must be a list of integer token ids, got " + t.dump());
    }
    bool out = id < 0 || id > std::numeric_limits<int32_t>::max() || (vocab_size > 0 && id >= vocab_size);
    if (out) {
      std::string range = vocab_size > 0 ? "[0, " + std::to_string(vocab_size) + ")" : "[0, 2^31)";
      ctx.bad("token id " + std::to_string(id) + " out of range " + range);
    }
    tokens.push_back(static_cast<int32_t>(id));
  }
  return tokens;
}

// Under input.unknown_keys: error, a key that no part of this job reads is an error, never dropped.
void check_known_keys(const json& obj, const JobSpec& job, const LineContext& ctx) {
  const InputSpec& in = job.input;
  std::vector<std::string> known = {in.id_field, in.text_field, "messages", "chat_template_kwargs"};
  if (in.tokens_field) known.push_back(*in.tokens_field);
  if (job.task == Task::kScore) {
    known.push_back(in.completion_field);
    known.push_back("completion_tokens");
  }
  for (const auto& k : per_line_sampling_names()) known.push_back(k);
  for (const auto& kv : obj.items()) {
    if (std::find(known.begin(), known.end(), kv.key()) != known.end()) continue;
    std::string hint;
    if (job.task != Task::kScore && (kv.key() == in.completion_field || kv.key() == "completion_tokens"))
      hint = "'" + kv.key() + "' is read only by task: score; ";
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    ctx.bad("unknown key '" + kv.key() + "' (" + hint + "this job reads: " + list +
            "; input.unknown_keys: ignore skips keys it does not read)");
  }
}

}  // namespace

bool is_blank_line(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

namespace {

// The source text of the top-level number under `key` (the last one, as the parser keeps the last
// of duplicated keys): the parser turns integers beyond 2^64 and decimals into doubles, whose dump
// is not what the input says.
std::string number_as_written(std::string_view line, const std::string& key) {
  struct Sax : json::json_sax_t {
    const std::string& wanted;
    int depth = 0;
    bool at_key = false;
    std::string text;
    explicit Sax(const std::string& k) : wanted(k) {}
    bool value() { at_key = false; return true; }
    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t& s) override {
      if (at_key) text = s;
      return value();
    }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override { ++depth; return value(); }
    bool key(string_t& k) override { at_key = depth == 1 && k == wanted; return true; }
    bool end_object() override { --depth; return value(); }
    bool start_array(std::size_t) override { ++depth; return value(); }
    bool end_array() override { --depth; return value(); }
    bool parse_error(std::size_t, const std::string&, const json::exception&) override { return false; }
  } sax(key);
  json::sax_parse(line.begin(), line.end(), &sax);
  return sax.text;
}

// The row's prompt: an OpenAI request's token ids, else tokens_field's ids, else "messages" (with
// its chat_template_kwargs), else text_field's text.
void read_prompt(const json& obj, std::string_view line, bool openai, std::optional<std::vector<int32_t>> openai_ids,
                 const InputSpec& in, int64_t vocab_size, const LineContext& ctx, InputRow& row) {
  auto text_it = obj.find(in.text_field);
  auto messages_it = obj.find("messages");
  const bool has_messages = messages_it != obj.end() && !messages_it->is_null();
  if (openai_ids) {
    row.tokens = std::move(openai_ids);
  } else if (in.tokens_field) {
    const std::string& tf = *in.tokens_field;
    auto it = obj.find(tf);
    if (it == obj.end()) ctx.bad("field '" + tf + "' is missing");
    if (!it->is_array()) ctx.bad("'" + tf + "' must be a list of token ids");
    if (it->empty()) ctx.bad("'" + tf + "' is empty");
    if (has_messages) ctx.bad("a row has either '" + tf + "' or 'messages', not both");
    row.tokens = token_ids(*it, tf, ctx, vocab_size);
    if (text_it != obj.end() && text_it->is_string()) row.text = text_it->get<std::string>();
  } else if (has_messages) {
    if (text_it != obj.end() && !text_it->is_null())
      ctx.bad("a row has either '" + in.text_field + "' or 'messages', not both");
    RowChat chat = read_row_chat(line, openai, ctx);
    row.messages_json = std::move(chat.messages_json);
    row.chat_template_kwargs = std::move(chat.kwargs_json);
  } else {
    if (text_it == obj.end()) ctx.bad("field '" + in.text_field + "' is missing");
    if (!text_it->is_string()) ctx.bad("'" + in.text_field + "' must be a string");
    row.text = text_it->get<std::string>();
  }

  if (auto it = obj.find("chat_template_kwargs"); it != obj.end() && !it->is_null() && !has_messages)
    ctx.bad("'chat_template_kwargs' is read only with 'messages' (the chat template renders them)");
}

}  // namespace

int64_t json_nesting_depth(std::string_view text, int64_t stop_above) {
  int64_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > stop_above) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string input_line_id(std::string_view line, int64_t index, const std::string& id_field) {
  std::string id = std::to_string(index);
  if (json_nesting_depth(line) > kMaxJsonDepth) return id;
  try {
    const json obj = json::parse(line.begin(), line.end());
    if (!obj.is_object()) return id;
    if (obj.contains("custom_id") && obj.contains("body")) {  // an OpenAI request: its custom_id
      const json& c = obj["custom_id"];
      return c.is_string() ? c.get<std::string>() : id;
    }
    auto it = obj.find(id_field);
    if (it == obj.end() || it->is_null()) return id;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number_float()) return number_as_written(line, id_field);
    if (it->is_number()) return it->dump();
  } catch (const json::exception&) {
  }
  return id;
}

InputRow parse_input_row(std::string_view line, int64_t index, const JobSpec& job, int64_t vocab_size) {
  LineContext ctx{index, std::to_string(index)};
  if (is_blank_line(line)) ctx.bad("empty line");
  if (!tok::utf8_is_valid(line)) ctx.bad("invalid UTF-8");
  if (json_nesting_depth(line) > kMaxJsonDepth)
    ctx.bad("JSON nested more than " + std::to_string(kMaxJsonDepth) + " levels deep");
  json obj;
  try {
    obj = json::parse(line.begin(), line.end());
  } catch (const json::exception& e) {
    ctx.bad("not valid JSON (" + json_error_detail(e.what()) + ")");
  }
  if (!obj.is_object()) ctx.bad("not a JSON object");
  const bool openai = obj.contains("custom_id") && obj.contains("body");
  if (openai) obj = openai_request_to_row(obj, job, ctx);
  std::optional<std::vector<int32_t>> openai_ids;  // a request's token-id input (embeddings) or prompt
  for (const auto& [key, field] :
       {std::pair{&kOpenAiInputIds, "body.input"}, std::pair{&kOpenAiPromptIds, "body.prompt"}})
    if (openai && obj.contains(*key)) {
      openai_ids = token_ids(obj[*key], field, ctx, vocab_size);
      obj.erase(*key);
    }

  InputRow row;
  row.index = index;
  row.id = ctx.id;
  const InputSpec& in = job.input;
  if (auto it = obj.find(in.id_field); it != obj.end() && !it->is_null()) {
    if (it->is_string()) {
      row.id = it->get<std::string>();
      if (row.id.find('\0') != std::string::npos)  // ids are stored as C strings: it would be cut
        ctx.bad("'" + in.id_field + "' contains a NUL character (\\u0000), which the results file cannot store");
    } else if (it->is_number_float()) {
      row.id = number_as_written(line, in.id_field);  // 1.50, 1e3, 2^64 and beyond: as in the input
    } else if (it->is_number()) {
      row.id = it->dump();
    } else {
      ctx.bad("'" + in.id_field + "' must be a string or a number");
    }
    ctx.id = row.id;
  }

  read_prompt(obj, line, openai, std::move(openai_ids), in, vocab_size, ctx, row);

  if (job.task == Task::kScore) {
    if (auto it = obj.find(in.completion_field); it != obj.end() && !it->is_null()) {
      if (!it->is_string()) ctx.bad("'" + in.completion_field + "' must be a string");
      row.completion = it->get<std::string>();
    }
    if (auto it = obj.find("completion_tokens"); it != obj.end() && !it->is_null()) {
      if (row.completion) ctx.bad("a row has either '" + in.completion_field + "' or 'completion_tokens', not both");
      if (!it->is_array()) ctx.bad("'completion_tokens' must be a list of token ids");
      row.completion_tokens = token_ids(*it, "completion_tokens", ctx, vocab_size);
    }
  }

  if (in.unknown_keys == UnknownKeys::kError) check_known_keys(obj, job, ctx);

  row.sampling = job.sampling;
  apply_line_sampling(obj, ctx, row.sampling);
  if (row.sampling.n > 1 && job.task != Task::kGenerate)
    ctx.bad("'n' is " + std::to_string(row.sampling.n) + ", but several samples of a prompt need task: generate");
  return row;
}

JsonlReader::JsonlReader(const std::string& path) : in_(path, std::ios::binary), path_(path) {
  if (!in_) throw JobError("input file '" + path + "' cannot be opened");
}

bool JsonlReader::read_physical(std::string& line) {
  if (!std::getline(in_, line)) {
    if (in_.bad()) throw Error("input file '" + path_ + "': read error after line " + std::to_string(physical_));
    return false;
  }
  if (physical_ == 0 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++physical_;
  return true;
}

bool JsonlReader::next(std::string& line) {
  if (queue_.empty()) {
    if (!read_physical(line)) return false;
    if (!is_blank_line(line)) {
      ++lines_;
      return true;
    }
    // A blank line: a row only if a non-blank line follows.
    queue_.push_back(std::move(line));
    std::string more;
    for (;;) {
      if (!read_physical(more)) {
        queue_.clear();
        return false;
      }
      bool blank = is_blank_line(more);
      queue_.push_back(std::move(more));
      if (!blank) break;
    }
  }
  line = std::move(queue_.front());
  queue_.pop_front();
  ++lines_;
  return true;
}

int64_t samples_of_line(std::string_view line, const JobSpec& job) {
  if (job.task != Task::kGenerate) return 1;  // sampling.n is 1 there; a line's "n" is its error row
  if (line.find("\"n\"") == std::string_view::npos) return job.sampling.n;  // no key "n": the common case
  if (json_nesting_depth(line) > kMaxJsonDepth) return job.sampling.n;  // a bad line
  try {
    const json obj = json::parse(line.begin(), line.end());
    return obj.is_object() ? line_samples(obj, job.sampling.n) : job.sampling.n;
  } catch (const json::exception&) {
    return job.sampling.n;  // a bad line: its rows are error rows
  }
}

int64_t count_jsonl_rows(const std::string& path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) throw JobError("input file '" + path + "' cannot be opened");
  std::vector<char> buf(1 << 20);
  int64_t line_no = 0, last_nonblank = 0;
  bool blank = true, has_chars = false, first = true;
  for (;;) {
    size_t n = std::fread(buf.data(), 1, buf.size(), f.get());
    if (n == 0) break;
    size_t i = 0;
    if (first) {
      first = false;
      if (n >= 3 && buf[0] == '\xEF' && buf[1] == '\xBB' && buf[2] == '\xBF') i = 3, has_chars = true;
    }
    for (; i < n; ++i) {
      char c = buf[i];
      if (c == '\n') {
        ++line_no;
        if (!blank) last_nonblank = line_no;
        blank = true;
        has_chars = false;
      } else {
        has_chars = true;
        if (c != ' ' && c != '\t' && c != '\r') blank = false;
      }
    }
  }
  if (std::ferror(f.get())) throw Error("input file '" + path + "': read error");
  if (has_chars) {
    ++line_no;
    if (!blank) last_nonblank = line_no;
  }
  return last_nonblank;
}

namespace {

// FNV-1a 64 over the first `limit` bytes of the file (all of it when limit < 0); `bytes` gets how
// many were read, `last` the last of them.
uint64_t hash_prefix(const std::string& path, int64_t limit, uint64_t& bytes, char& last) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("input file '" + path + "' cannot be read");
  uint64_t hash = 0xcbf29ce484222325ull;
  bytes = 0;
  last = '\n';
  std::vector<char> buf(1 << 20);
  while (in && (limit < 0 || bytes < static_cast<uint64_t>(limit))) {
    const uint64_t want = limit < 0 ? buf.size() : std::min<uint64_t>(buf.size(), static_cast<uint64_t>(limit) - bytes);
    in.read(buf.data(), static_cast<std::streamsize>(want));
    const std::streamsize n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i) hash = (hash ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ull;
    if (n > 0) last = buf[static_cast<size_t>(n - 1)];
    bytes += static_cast<uint64_t>(n);
    if (n == 0) break;
  }
  return hash;
}

std::string fingerprint_text(uint64_t bytes, uint64_t hash) {
  char out[64];
  std::snprintf(out, sizeof out, "%llu:%016llx", static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(hash));
  return out;
}

}  // namespace

std::string input_fingerprint(const std::string& path) {
  uint64_t bytes = 0;
  char last = 0;
  const uint64_t hash = hash_prefix(path, -1, bytes, last);
  return fingerprint_text(bytes, hash);
}

bool input_grew_from(const std::string& path, const std::string& fingerprint) {
  const size_t colon = fingerprint.find(':');
  if (colon == std::string::npos) return false;
  const long long old_bytes = std::atoll(fingerprint.substr(0, colon).c_str());
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || old_bytes < 0 || static_cast<uint64_t>(old_bytes) >= size) return false;
  uint64_t bytes = 0;
  char last = 0;
  const uint64_t hash = hash_prefix(path, old_bytes, bytes, last);
  return bytes == static_cast<uint64_t>(old_bytes) && (bytes == 0 || last == '\n') &&
         fingerprint_text(bytes, hash) == fingerprint;
}

}  // namespace tpbatch
