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
#include "tokenizer/utf8.h"

namespace tpbatch {
namespace {

using json = nlohmann::json;

struct LineContext {
  int64_t index;
  std::string id;
  [[noreturn]] void bad(const std::string& reason) const {
    throw BadLine{index, id, "input line " + std::to_string(index + 1) + ": " + reason};
  }
};

std::string json_error_detail(const std::string& what) {
  std::string d = what;
  auto br = d.find("] ");
  if (d.rfind("[json.exception", 0) == 0 && br != std::string::npos) d = d.substr(br + 2);
  const std::string prefix = "parse error at line 1, ";
  if (d.rfind(prefix, 0) == 0) d = d.substr(prefix.size());
  if (d.size() > 200) d = d.substr(0, 197) + "...";
  return d;
}

// A JSON integer as int64; false if not an integer or out of int64 range.
bool as_int64(const json& v, int64_t& out) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return false;
    out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  return false;
}

void apply_overrides(const json& obj, const LineContext& ctx, SamplingParams& s) {
  auto field = [&](const char* name) -> const json* {
    auto it = obj.find(name);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
  };
  // An integer override: ">= min" or, with a max, "in [min, max]", as the message says.
  auto integer = [&](const char* name, int64_t& out, int64_t min, std::optional<int64_t> max = std::nullopt) {
    const json* v = field(name);
    if (!v) return;
    int64_t x;
    if (!as_int64(*v, x) || x < min || (max && x > *max))
      ctx.bad(std::string("'") + name + "' must be an integer " +
              (max ? "in [" + std::to_string(min) + ", " + std::to_string(*max) + "]" : ">= " + std::to_string(min)));
    out = x;
  };
  integer("max_new_tokens", s.max_new_tokens, 0);
  if (const json* v = field("temperature")) {
    if (!v->is_number()) ctx.bad("'temperature' must be a number");
    double x = v->get<double>();
    if (!(x >= 0)) ctx.bad("'temperature' must be >= 0");
    s.temperature = x;
  }
  integer("top_k", s.top_k, 0);
  if (const json* v = field("top_p")) {
    if (!v->is_number()) ctx.bad("'top_p' must be a number");
    double x = v->get<double>();
    if (!(x > 0 && x <= 1)) ctx.bad("'top_p' must be in (0, 1]");
    s.top_p = x;
  }
  if (const json* v = field("seed")) {
    if (!v->is_number_unsigned()) ctx.bad("'seed' must be a non-negative integer");
    s.seed = v->get<uint64_t>();
  }
  if (const json* v = field("stop")) {
    std::vector<std::string> stop;
    const std::string msg = "'stop' must be a string or a list of non-empty strings";
    if (v->is_string()) {
      stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const auto& e : *v) {
        if (!e.is_string()) ctx.bad(msg);
        stop.push_back(e.get<std::string>());
      }
    } else {
      ctx.bad(msg);
    }
    for (const auto& st : stop)
      if (st.empty()) ctx.bad(msg);
    s.stop = std::move(stop);
  }
  if (const json* v = field("ignore_eos")) {
    if (!v->is_boolean()) ctx.bad("'ignore_eos' must be true or false");
    s.ignore_eos = v->get<bool>();
  }
  if (const json* v = field("min_p")) {
    if (!v->is_number() || !(v->get<double>() >= 0 && v->get<double>() <= 1)) ctx.bad("'min_p' must be a number in [0, 1]");
    s.min_p = v->get<double>();
  }
  if (const json* v = field("repetition_penalty")) {
    if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>()))
      ctx.bad("'repetition_penalty' must be a finite number > 0");
    s.repetition_penalty = v->get<double>();
  }
  for (const char* name : {"presence_penalty", "frequency_penalty"})
    if (const json* v = field(name)) {
      if (!v->is_number() || !std::isfinite(v->get<double>())) ctx.bad(std::string("'") + name + "' must be a finite number");
      (name[0] == 'p' ? s.presence_penalty : s.frequency_penalty) = v->get<double>();
    }
  if (const json* v = field("stop_token_ids")) {
    const std::string msg = "'stop_token_ids' must be a list of token ids (integers >= 0)";
    if (!v->is_array()) ctx.bad(msg);
    std::vector<int32_t> ids;
    for (const auto& e : *v) {
      int64_t id;
      if (!as_int64(e, id) || id < 0 || id > std::numeric_limits<int32_t>::max()) ctx.bad(msg);
      ids.push_back(static_cast<int32_t>(id));
    }
    s.stop_token_ids = std::move(ids);
  }
  integer("min_tokens", s.min_tokens, 0);
  integer("top_logprobs", s.top_logprobs, 0, kMaxTopLogprobs);
  integer("n", s.n, 1, kMaxSamples);
}

// A line's sample count as samples_of_line() reads it: the line's own valid "n" (or body.n), else
// the job's. Kept in step with apply_overrides and the OpenAI body mapping.
int64_t line_samples(const json& obj, int64_t job_n) {
  const json* v = nullptr;
  if (obj.contains("custom_id") && obj.contains("body")) {
    if (const auto b = obj.find("body"); b->is_object())
      if (const auto n = b->find("n"); n != b->end()) v = &*n;
  } else if (const auto n = obj.find("n"); n != obj.end()) {
    v = &*n;
  }
  int64_t x;
  if (v && !v->is_null() && as_int64(*v, x) && x >= 1 && x <= kMaxSamples) return x;
  return job_n;
}

// The row's token ids, each in [0, vocab_size) (vocab_size 0: any int32 >= 0).
std::vector<int32_t> token_ids(const json& list, const std::string& field, const LineContext& ctx,
                               int64_t vocab_size) {
  std::vector<int32_t> tokens;
  tokens.reserve(list.size());
  for (const auto& t : list) {
    int64_t id;
    if (!as_int64(t, id)) {
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

// OpenAI chat format: a non-empty list of {"role": string, "content": string, ...}. Other keys of
// a message are kept: chat templates may read them.
void check_messages(const json& m, const LineContext& ctx) {
  if (!m.is_array()) ctx.bad("'messages' must be a list of {\"role\", \"content\"} objects");
  if (m.empty()) ctx.bad("'messages' is empty");
  for (size_t i = 0; i < m.size(); ++i) {
    const std::string at = "'messages[" + std::to_string(i) + "]";
    if (!m[i].is_object()) ctx.bad(at + "' must be an object with 'role' and 'content'");
    auto role = m[i].find("role");
    if (role == m[i].end() || !role->is_string()) ctx.bad(at + ".role' must be a string");
    auto content = m[i].find("content");
    if (content == m[i].end() || !content->is_string())
      ctx.bad(at + ".content' must be a string (lists of content parts are not supported)");
  }
}

// An OpenAI Batch API request line ({"custom_id", "method", "url", "body"}) as the plain row it
// asks for: custom_id is the id, body.prompt (completions) or body.messages (chat) the prompt,
// max_tokens / max_completion_tokens, temperature, top_p, seed, stop, presence/frequency_penalty
// and top_logprobs (completions: logprobs: k) the overrides, as are vLLM's extra sampling keys
// (top_k, min_p, repetition_penalty, min_tokens, stop_token_ids, ignore_eos). body.model is
// ignored (the job names the model); n is the number of samples (choices); stream: false and chat's
// logprobs: true|false are accepted as what the engine does anyway; other body keys are unknown keys.
// Where a /v1/embeddings request's token-id input waits, in the converted row, for
// parse_input_row (a name no input line can use: it starts with a NUL).
const std::string kOpenAiInputIds = std::string("\0openai_input_ids", 17);

// A /v1/embeddings request (custom_id, method and top-level keys checked by the caller): body.input
// (a string, a one-string list, or a list of token ids: one input per request) is the prompt;
// body.model is ignored (the job names the model) and encoding_format may only be "float" (the
// values are stored as float32). A job whose task is not embed gets an error row saying so.
json openai_embedding_request_to_row(const json& req, const JobSpec& job, LineContext& ctx) {
  const InputSpec& in = job.input;
  if (job.task != Task::kEmbed)
    ctx.bad("url '/v1/embeddings' asks for an embedding, but this job's task is " + std::string(task_name(job.task)) +
            " (an embeddings batch needs task: embed)");
  const json& body = req["body"];
  if (!body.is_object()) ctx.bad("'body' must be an object");
  json row = json::object();
  row[in.id_field] = ctx.id;
  for (const auto& kv : body.items()) {
    const std::string& k = kv.key();
    const json& v = kv.value();
    if (k == "model" || v.is_null()) continue;
    if (k == "input") {
      if (v.is_string()) row[in.text_field] = v;
      else if (v.is_array() && v.size() == 1 && v[0].is_string()) row[in.text_field] = v[0];
      else if (v.is_array() && !v.empty() && std::all_of(v.begin(), v.end(), [](const json& t) { return t.is_number(); }))
        row[kOpenAiInputIds] = v;
      else ctx.bad("'body.input' must be a string or a non-empty list of token ids (one input per request)");
    } else if (k == "encoding_format") {
      if (!(v.is_string() && v.get<std::string>() == "float"))
        ctx.bad("'body.encoding_format' must be \"float\" (embeddings are stored as float32)");
    } else if (in.unknown_keys == UnknownKeys::kError) {
      ctx.bad("unknown key 'body." + k + "' (this engine reads body.input and body.encoding_format of an "
              "embeddings request; input.unknown_keys: ignore skips the others)");
    }
  }
  if (!row.contains(in.text_field) && !row.contains(kOpenAiInputIds)) ctx.bad("field 'body.input' is missing");
  return row;
}

json openai_request_to_row(const json& req, const JobSpec& job, LineContext& ctx) {
  const InputSpec& in = job.input;
  const bool strict = in.unknown_keys == UnknownKeys::kError;
  auto cid = req.find("custom_id");
  if (!cid->is_string()) ctx.bad("'custom_id' must be a string");
  ctx.id = cid->get<std::string>();
  for (const auto& kv : req.items())
    if (strict && kv.key() != "custom_id" && kv.key() != "method" && kv.key() != "url" && kv.key() != "body")
      ctx.bad("unknown key '" + kv.key() + "' in an OpenAI batch request (custom_id, method, url, body; "
              "input.unknown_keys: ignore skips it)");
  if (auto m = req.find("method"); m != req.end() && !(m->is_string() && m->get<std::string>() == "POST"))
    ctx.bad("'method' must be \"POST\"");
  auto url_it = req.find("url");
  if (url_it == req.end() || !url_it->is_string()) ctx.bad("field 'url' is missing (an OpenAI batch request)");
  const std::string url = url_it->get<std::string>();
  if (url == "/v1/embeddings") return openai_embedding_request_to_row(req, job, ctx);
  const bool chat = url == "/v1/chat/completions";
  if (!chat && url != "/v1/completions")
    ctx.bad("url '" + url + "' is not supported (only /v1/completions, /v1/chat/completions and /v1/embeddings)");
  if (job.task != Task::kGenerate) ctx.bad("OpenAI batch requests need task: generate");
  const json& body = req["body"];
  if (!body.is_object()) ctx.bad("'body' must be an object");
  json row = json::object();
  row[in.id_field] = ctx.id;
  for (const auto& kv : body.items()) {
    const std::string& k = kv.key();
    const json& v = kv.value();
    if (k == "model" || v.is_null()) continue;
    if (!chat && k == "prompt") {
      if (v.is_array() && v.size() == 1 && v[0].is_string()) row[in.text_field] = v[0];
      else if (v.is_string()) row[in.text_field] = v;
      else ctx.bad("'body.prompt' must be a string (one prompt per request)");
    } else if (chat && k == "messages") {
      row["messages"] = v;
    } else if (k == "max_tokens" || k == "max_completion_tokens") {
      if (row.contains("max_new_tokens") && row["max_new_tokens"] != v)
        ctx.bad("'body.max_tokens' and 'body.max_completion_tokens' differ");
      row["max_new_tokens"] = v;
    } else if (k == "temperature" || k == "top_p" || k == "seed" || k == "stop" || k == "presence_penalty" ||
               k == "frequency_penalty" || k == "top_logprobs" || k == "top_k" || k == "min_p" ||
               k == "repetition_penalty" || k == "min_tokens" || k == "stop_token_ids" || k == "ignore_eos") {
      // The OpenAI keys and vLLM's extra sampling parameters, under the same names as row keys.
      if (k == "top_logprobs" && row.contains("top_logprobs") && row["top_logprobs"] != v)
        ctx.bad("'body.logprobs' and 'body.top_logprobs' differ");
      row[k] = v;
    } else if (!chat && k == "logprobs" && v.is_number_integer()) {
      // /v1/completions: logprobs is the number of alternatives (top_logprobs).
      if (row.contains("top_logprobs") && row["top_logprobs"] != v) ctx.bad("'body.logprobs' and 'body.top_logprobs' differ");
      row["top_logprobs"] = v;
    } else if (k == "n") {  // independent samples: the response's choices
      row["n"] = v;
    } else if (k == "logprobs" && v.is_boolean()) {
      // /v1/chat/completions: the chosen tokens' logprobs are /output_logprobs (output.logprobs);
      // body.top_logprobs asks for alternatives.
    } else if (k == "stream" && v.is_boolean() && !v.get<bool>()) {
    } else if (strict) {
      ctx.bad("unknown key 'body." + k + "' (this engine reads body." + (chat ? "messages" : "prompt") +
              ", max_tokens, max_completion_tokens, temperature, top_p, top_k, min_p, seed, stop, stop_token_ids, "
              "presence_penalty, frequency_penalty, repetition_penalty, min_tokens, ignore_eos, n, logprobs, "
              "top_logprobs; input.unknown_keys: ignore "
              "skips the others)");
    }
  }
  if (chat && !row.contains("messages")) ctx.bad("field 'body.messages' is missing");
  if (!chat && !row.contains(in.text_field)) ctx.bad("field 'body.prompt' is missing");
  return row;
}

// Under input.unknown_keys: error, a key that no part of this job reads is an error, never dropped.
void check_known_keys(const json& obj, const JobSpec& job, const LineContext& ctx) {
  const InputSpec& in = job.input;
  std::vector<std::string> known = {in.id_field, in.text_field, "messages"};
  if (in.tokens_field) known.push_back(*in.tokens_field);
  if (job.task == Task::kScore) {
    known.push_back(in.completion_field);
    known.push_back("completion_tokens");
  }
  for (const auto& k : row_sampling_keys()) known.push_back(k);
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

const std::vector<std::string>& row_sampling_keys() {
  // Keep in step with apply_overrides (a per-line override missing here is rejected as unknown).
  static const std::vector<std::string> keys = {"max_new_tokens", "temperature", "top_k", "top_p", "seed", "stop",
                                                "ignore_eos", "min_p", "repetition_penalty", "presence_penalty",
                                                "frequency_penalty", "stop_token_ids", "min_tokens", "top_logprobs", "n"};
  return keys;
}

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
  std::optional<std::vector<int32_t>> openai_ids;  // a /v1/embeddings request's token-id input
  if (openai && obj.contains(kOpenAiInputIds)) {
    openai_ids = token_ids(obj[kOpenAiInputIds], "body.input", ctx, vocab_size);
    obj.erase(kOpenAiInputIds);
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
    check_messages(*messages_it, ctx);
    // Again in the line's own key order: a template's tojson must see the dicts as written.
    const auto ordered = nlohmann::ordered_json::parse(line.begin(), line.end());
    row.messages_json = (openai ? ordered["body"]["messages"] : ordered["messages"]).dump();
  } else {
    if (text_it == obj.end()) ctx.bad("field '" + in.text_field + "' is missing");
    if (!text_it->is_string()) ctx.bad("'" + in.text_field + "' must be a string");
    row.text = text_it->get<std::string>();
  }

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
  apply_overrides(obj, ctx, row.sampling);
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
