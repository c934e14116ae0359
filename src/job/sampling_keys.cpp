// The table of sampling parameters.
#include "job/sampling_keys.h"

#include <algorithm>
#include <cstring>

#include "guided/constraint.h"

namespace tpbatch {

namespace {
using namespace job_key;
constexpr const char* kPrefix = "sampling.";
}  // namespace

// "sampling.top_p" -> "top_p"; a key of another section by its vLLM name: "guided.json" -> "guided_json".
std::string SamplingKey::name() const {
  if (std::strncmp(key, kPrefix, std::strlen(kPrefix)) == 0) return key + std::strlen(kPrefix);
  std::string n = key;
  std::replace(n.begin(), n.end(), '.', '_');
  return n;
}

namespace {
std::string guided_json_problem(const nlohmann::ordered_json& schema, const std::string& key) {
  guided::ConstraintSource s;
  s.json_schema = schema.dump();
  const std::string why = guided::constraint_problem(s);
  return why.empty() ? "" : "'" + key + "': " + why.substr(why.find(": ") + 2);
}
}  // namespace

// One function on purpose: it is a table, one row per sampling key in the order the docs list them.
const std::vector<SamplingKey>& sampling_keys() {
  // An OpenAI body key is the row key's name unless listed otherwise (vLLM's extra sampling keys too).
  static const std::vector<SamplingKey> keys = {
      {"sampling.max_new_tokens", Integer{JOB_FIELD(sampling.max_new_tokens), 0},
       "Generate: the most tokens a row generates. Every sampling key may also be set per line in the JSONL.",
       true, {"max_tokens", "max_completion_tokens"}},
      {"sampling.temperature", Number{JOB_FIELD(sampling.temperature), 0.0, false, std::nullopt}, "0 = greedy.",
       true, {"temperature"}},
      {"sampling.top_k", Integer{JOB_FIELD(sampling.top_k), 0}, "Keep the k most likely tokens; 0 = off.",
       true, {"top_k"}},
      {"sampling.top_p", Number{JOB_FIELD(sampling.top_p), 0.0, true, 1.0},
       "Keep the smallest set of most likely tokens whose probability reaches p; 1 = off.", true, {"top_p"}},
      {"sampling.seed", Unsigned{JOB_FIELD(sampling.seed)},
       "A row's samples depend only on (seed, row, sample, step), never on the layout, the batch or an interruption.",
       true, {"seed"}},
      {"sampling.stop", StopStrings{JOB_FIELD(sampling.stop)},
       "Stop strings: the row finishes with `finish_reason` `stop`; the stop string is not in `/output_text`.",
       true, {"stop"}},
      {"sampling.ignore_eos", Flag{JOB_FIELD(sampling.ignore_eos)}, "Keep generating past EOS.", true,
       {"ignore_eos"}},
      {"sampling.min_p", Number{JOB_FIELD(sampling.min_p), 0.0, false, 1.0},
       "Keep tokens whose probability at the temperature is at least min_p × the most likely one's (after top_k and "
       "top_p); 0 = off.",
       true, {"min_p"}},
      {"sampling.repetition_penalty", Number{JOB_FIELD(sampling.repetition_penalty), 0.0, true, std::nullopt},
       "Hugging Face's: each distinct token of the prompt and of the output has a positive logit divided by it, a "
       "negative one multiplied; 1 = off.",
       true, {"repetition_penalty"}},
      {"sampling.presence_penalty", FiniteNumber{JOB_FIELD(sampling.presence_penalty)},
       "OpenAI's: a logit drops by this if its token occurs among the generated tokens (the prompt does not count).",
       true, {"presence_penalty"}},
      {"sampling.frequency_penalty", FiniteNumber{JOB_FIELD(sampling.frequency_penalty)},
       "OpenAI's: a logit drops by this × its token's count among the generated tokens.", true,
       {"frequency_penalty"}},
      {"sampling.stop_token_ids", TokenIds{JOB_FIELD(sampling.stop_token_ids)},
       "Generating one of these ids finishes the row with `finish_reason` `stop`; the id stays in `/output_tokens`, "
       "its text is not in `/output_text`.",
       true, {"stop_token_ids"}},
      {"sampling.min_tokens", Integer{JOB_FIELD(sampling.min_tokens), 0},
       "EOS and stop_token_ids cannot be picked until this many tokens are generated.",
       true, {"min_tokens"}},
      {"sampling.top_logprobs", Integer{JOB_FIELD(sampling.top_logprobs), 0, kMaxTopLogprobs},
       "Record the k most likely tokens and their logprobs at every generated position (`/top_logprob_tokens`, "
       "`/top_logprobs`).",
       true, {"logprobs", "top_logprobs"}},
      // Emitted only when not the default: files written before the key existed still resume.
      {"sampling.n", Integer{JOB_FIELD(sampling.n), 1, kMaxSamples},
       "Generate: samples per prompt, each its own results row (consecutive, in input order).", true, {"n"},
       [](const JobSpec& j) { return j.sampling.n != 1; }},
      {"sampling.max_reasoning_tokens", Integer{JOB_FIELD(sampling.max_reasoning_tokens), 0},
       "Generate: a thinking budget. Once a row's open `<think>` block (opened by the prompt or by a generated "
       "`<think>`) holds this many generated tokens, its next token is `</think>`; rows that never open one are "
       "unchanged. Unset = no budget.",
       true, {"max_reasoning_tokens"},
       [](const JobSpec& j) { return j.sampling.max_reasoning_tokens != kNoReasoningBudget; }},
      // Constraints (docs/guided.md): at most one kind per job and per row; a row that sets a kind
      // replaces the job's. The job's are compiled when the job file is read, before any weights load.
      {"guided.json", JsonMapping{JOB_FIELD(sampling.guided.json_schema), guided_json_problem},
       "A JSON Schema (the subset docs/guided.md lists) the output must validate against, written as compact JSON. "
       "A row's `guided_json` (an object, or a string holding one) or OpenAI `response_format` json_schema sets it "
       "per row.",
       true, {"guided_json"}, [](const JobSpec& j) { return !j.sampling.guided.json_schema.empty(); }},
      {"guided.json_object", Flag{JOB_FIELD(sampling.guided.json_object)},
       "The output is a JSON object (compact; nested a few levels). OpenAI's `response_format: {type: json_object}`.",
       true, {"guided_json_object"}, [](const JobSpec& j) { return j.sampling.guided.json_object; }},
      {"guided.regex", OptionalText{JOB_FIELD(sampling.guided.regex)},
       "A regex the whole output must match (the syntax docs/guided.md lists).", true, {"guided_regex"},
       [](const JobSpec& j) { return j.sampling.guided.regex.has_value(); }},
      {"guided.choice", StopStrings{JOB_FIELD(sampling.guided.choice)}, "The output is exactly one of these strings.",
       true, {"guided_choice"}, [](const JobSpec& j) { return !j.sampling.guided.choice.empty(); }},
      {"guided.grammar", OptionalText{JOB_FIELD(sampling.guided.grammar)},
       "Not supported: a grammar is refused, naming the key (use guided.json, guided.regex or guided.choice).",
       true, {"guided_grammar"}, [](const JobSpec& j) { return j.sampling.guided.grammar.has_value(); }},
      {"guided.max_string_length", Integer{JOB_FIELD(sampling.guided.max_string_length), 0},
       "The most characters of a JSON string whose schema sets no maxLength (guided.json, guided.json_object); "
       "0 = unbounded. Lets a model that never closes its strings still finish an object.",
       true, {"guided_max_string_length"}, [](const JobSpec& j) { return j.sampling.guided.max_string_length != 0; }},
      {"guided.max_items", Integer{JOB_FIELD(sampling.guided.max_items), 0},
       "The most items of a JSON array whose schema sets no maxItems (and members of a free object); 0 = unbounded.",
       true, {"guided_max_items"}, [](const JobSpec& j) { return j.sampling.guided.max_items != 0; }},
  };
  return keys;
}

std::vector<std::string> per_line_sampling_names() {
  std::vector<std::string> out;
  for (const SamplingKey& k : sampling_keys())
    if (k.per_line) out.push_back(k.name());
  return out;
}

const SamplingKey* sampling_key_of_openai_name(std::string_view body_key) {
  for (const SamplingKey& k : sampling_keys())
    if (std::find(k.openai.begin(), k.openai.end(), body_key) != k.openai.end()) return &k;
  return nullptr;
}

std::vector<std::string> openai_sampling_names() {
  std::vector<std::string> out;
  for (const SamplingKey& k : sampling_keys()) out.insert(out.end(), k.openai.begin(), k.openai.end());
  return out;
}

}  // namespace tpbatch
