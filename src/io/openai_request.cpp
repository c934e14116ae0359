// OpenAI Batch API request lines, converted to plain input rows.
#include "io/openai_request.h"

#include <algorithm>
#include <map>

#include "job/sampling_keys.h"

namespace tpbatch {

const std::string kOpenAiInputIds = std::string("\0openai_input_ids", 17);
const std::string kOpenAiPromptIds = std::string("\0openai_prompt_ids", 18);

namespace {

using json = nlohmann::json;

// The sampling parameter a body key carries, if any: "logprobs" carries top_logprobs only as
// /v1/completions' integer (chat's is a boolean flag).
const SamplingKey* carried_sampling_key(const std::string& k, const json& v, bool chat) {
  if (k == "logprobs" && (chat || !v.is_number_integer())) return nullptr;
  return sampling_key_of_openai_name(k);
}

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

bool is_token_ids(const json& v) {
  return v.is_array() && !v.empty() &&
         std::all_of(v.begin(), v.end(), [](const json& t) { return t.is_number_integer(); });
}

// A /v1/completions body.prompt: a string or a list of token ids (used as they are, no BOS added),
// either alone or as the one element of a list. A list of several prompts is refused: a request
// line is one prompt, whose rows are its n samples.
void read_completion_prompt(const json& v, json& row, const InputSpec& in, const LineContext& ctx) {
  const json& one = v.is_array() && v.size() == 1 && (v[0].is_string() || v[0].is_array()) ? v[0] : v;
  if (one.is_string()) {
    row[in.text_field] = one;
  } else if (is_token_ids(one)) {
    row[kOpenAiPromptIds] = one;
  } else if (v.is_array() && v.size() > 1 &&
             (std::all_of(v.begin(), v.end(), [](const json& p) { return p.is_string(); }) ||
              std::all_of(v.begin(), v.end(), [](const json& p) { return p.is_array(); }))) {
    ctx.bad("'body.prompt' holds " + std::to_string(v.size()) + " prompts; a request line is one prompt here "
            "(write one request line, with its own custom_id, per prompt)");
  } else {
    ctx.bad("'body.prompt' must be a string or a non-empty list of token ids (or a list of one of these)");
  }
}

// body.response_format as the row's constraint: json_object -> guided_json_object, json_schema ->
// guided_json (its json_schema.schema), text -> none.
void read_response_format(const json& v, json& row, LineContext& ctx) {
  const auto type = v.is_object() ? v.find("type") : v.end();
  if (!v.is_object() || type == v.end() || !type->is_string())
    ctx.bad("'body.response_format' must be an object with a 'type' (text, json_object or json_schema)");
  const std::string t = type->get<std::string>();
  if (t == "text") return;
  if (t == "json_object") {
    row["guided_json_object"] = true;
    return;
  }
  if (t != "json_schema")
    ctx.bad("'body.response_format.type' is '" + t + "' (this engine reads text, json_object and json_schema)");
  const auto js = v.find("json_schema");
  const json* schema = js != v.end() && js->is_object() && js->contains("schema") ? &(*js)["schema"] : nullptr;
  if (!schema || !schema->is_object())
    ctx.bad("'body.response_format.json_schema.schema' is missing or not an object");
  row["guided_json"] = *schema;
}

}  // namespace

// An OpenAI Batch API request line ({"custom_id", "method", "url", "body"}) as the plain row it
// asks for: custom_id is the id, body.prompt (completions) or body.messages (chat, with its
// chat_template_kwargs) the prompt, and the body keys of the sampling table (SamplingKey::openai:
// OpenAI's keys and vLLM's extra sampling keys; completions' logprobs: k is top_logprobs) the
// overrides. body.model is ignored (the job
// names the model); n is the number of samples (choices); stream: false and chat's logprobs:
// true|false are accepted as what the engine does anyway; other body keys are unknown keys.
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
  std::map<std::string, std::string> set_by;  // row key -> the body key that set it
  for (const auto& kv : body.items()) {
    const std::string& k = kv.key();
    const json& v = kv.value();
    if (k == "model" || v.is_null()) continue;
    if (!chat && k == "prompt") {
      read_completion_prompt(v, row, in, ctx);
    } else if (chat && (k == "messages" || k == "chat_template_kwargs")) {
      row[k] = v;
    } else if (k == "response_format") {
      read_response_format(v, row, ctx);
    } else if (const SamplingKey* key = carried_sampling_key(k, v, chat)) {
      // The OpenAI keys and vLLM's extra sampling parameters (sampling_keys()), as row keys.
      const std::string name = key->name();
      if (const auto other = set_by.find(name); other != set_by.end() && row[name] != v) {
        const auto& names = key->openai;  // named in the table's order
        const bool first = std::find(names.begin(), names.end(), k) < std::find(names.begin(), names.end(), other->second);
        ctx.bad("'body." + (first ? k : other->second) + "' and 'body." + (first ? other->second : k) + "' differ");
      }
      row[name] = v;
      set_by[name] = k;
    } else if (k == "logprobs" && v.is_boolean()) {
      // /v1/chat/completions: the chosen tokens' logprobs are /output_logprobs (output.logprobs);
      // body.top_logprobs asks for alternatives.
    } else if (k == "stream" && v.is_boolean() && !v.get<bool>()) {
    } else if (strict) {
      std::string list = chat ? "messages, chat_template_kwargs, response_format" : "prompt, response_format";
      for (const std::string& name : openai_sampling_names()) list += ", " + name;
      ctx.bad("unknown key 'body." + k + "' (this engine reads body." + list +
              "; input.unknown_keys: ignore skips the others)");
    }
  }
  if (chat && !row.contains("messages")) ctx.bad("field 'body.messages' is missing");
  if (!chat && !row.contains(in.text_field) && !row.contains(kOpenAiPromptIds))
    ctx.bad("field 'body.prompt' is missing");
  return row;
}


}  // namespace tpbatch
