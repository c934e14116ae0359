// The table of job keys, and the reading that follows it (the emitting: job_yaml_emitter.cpp).
#include "job/job_keys.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <type_traits>

#include "common/error.h"
#include "job/chat_template_kwargs.h"
#include "job/yaml_json.h"
#include "job/sampling_keys.h"

namespace tpbatch {

namespace {

using namespace job_key;

bool is_embed(const JobSpec& j) { return j.task == Task::kEmbed; }

// The keys before `sampling:` in the effective YAML (the sampling keys are sampling_keys()).
// One function on purpose: it is a table, one row per key in the order the docs list them.
std::vector<JobKey> keys_before_sampling() {
  return {
      {"model", Text{JOB_FIELD(model), TextRule::kRequired},
       "The model: a Hugging Face folder with `config.json`, `*.safetensors` (or `model.safetensors.index.json` and "
       "its shards) and `tokenizer.json`. A relative path is taken from the working directory, else from the job "
       "file's folder."},
      {"dtype", EnumChoice{{"auto", "float32", "bfloat16", "float16"}, JOB_ENUM_FIELD(dtype, DTypeChoice)},
       "The weights' dtype on the device: auto keeps the checkpoint's storage dtype (bf16/fp16 stay 16-bit); "
       "float32 widens. Norms and biases are always float32."},
      {"device", EnumChoice{{"auto", "cpu", "cuda"}, JOB_ENUM_FIELD(device, Device)},
       "Where the engine computes: auto picks CUDA when every rank sees a GPU, else the CPU, and the log says which "
       "and why."},

      {"parallel.tensor", Integer{JOB_FIELD(parallel.tensor), 1},
       "Tensor-parallel degree. The ranks of one TP group share a node."},
      {"parallel.pipeline", Integer{JOB_FIELD(parallel.pipeline), 1},
       "Pipeline stages, placed across nodes. Data-parallel replicas = world size / (tensor × pipeline)."},
      {"parallel.ranks_per_node", Integer{JOB_FIELD(parallel.ranks_per_node), 0},
       "0 = nodes as MPI reports them; N > 0 treats every N consecutive ranks as a node."},
      // Emitted only when not the default: files written before the key existed still resume.
      {"parallel.experts", EnumChoice{{"tensor", "expert"}, JOB_ENUM_FIELD(parallel.experts, ExpertSplit)},
       "Mixture-of-experts models: tensor splits every expert across the TP ranks like the dense MLP; expert gives "
       "each rank whole experts (num_experts / parallel.tensor of them). A dense model, or num_experts not divisible "
       "by parallel.tensor, makes expert a job error.",
       [](const JobSpec& j) { return j.parallel.experts != ExpertSplit::kTensor; }},

      {"input.path", Text{JOB_FIELD(input.path), TextRule::kRequired},
       "The input: a regular JSONL file, one JSON object a line, streamed (never loaded whole)."},
      {"input.text_field", Text{JOB_FIELD(input.text_field), TextRule::kNonEmpty}, "The field holding the prompt text."},
      {"input.tokens_field", OptionalText{JOB_FIELD(input.tokens_field)},
       "A field holding the prompt as a list of token ids, instead of text."},
      {"input.id_field", Text{JOB_FIELD(input.id_field), TextRule::kNonEmpty},
       "The field holding the row's id (optional in a line; default: the 0-based line number)."},
      {"input.completion_field", Text{JOB_FIELD(input.completion_field), TextRule::kNonEmpty},
       "Score task: the field holding the text whose likelihood is wanted. Without it in a line, the prompt itself is "
       "scored (perplexity)."},
      {"input.on_bad_line", EnumChoice{{"record", "fail"}, JOB_ENUM_FIELD(input.on_bad_line, OnBadLine)},
       "A bad line: record writes an error row and goes on; fail ends the job with exit 3."},
      {"input.unknown_keys", EnumChoice{{"error", "ignore"}, JOB_ENUM_FIELD(input.unknown_keys, UnknownKeys)},
       "A key in a line that the job does not read: error makes the row an error row naming it; ignore skips it."},
      {"input.score_tokenization",
       EnumChoice{{"joint", "separate"}, JOB_ENUM_FIELD(input.score_tokenization, ScoreTokenization)},
       "Score task: joint encodes context + completion as one text, as lm-evaluation-harness does; separate encodes "
       "the completion on its own."},
      // Emitted only when not the default: files written before the key existed still resume.
      {"input.truncate", EnumChoice{{"error", "left"}, JOB_ENUM_FIELD(input.truncate, Truncate)},
       "A prompt that does not fit the model's context: error makes it an error row; left keeps its last tokens.",
       [](const JobSpec& j) { return j.input.truncate != Truncate::kError; }},
      // Never emitted: every shard of a job has the same job_yaml, which resume and `tpbatch merge`
      // compare; the shard is recorded in the results file's own attributes.
      {"input.shard", Text{JOB_FIELD(input.shard)},
       "Run one shard of the input: INDEX/COUNT (shard INDEX of COUNT, from 0; one contiguous range of "
       "lines) or slurm (this Slurm array task's shard). Its own results file (results.shard-0003-of-0016.h5, "
       "or {shard} in output.path replaced); `tpbatch merge` joins the shards. Same as `run --shard`.",
       [](const JobSpec&) { return false; }},

      {"task", EnumChoice{{"generate", "score", "embed"}, JOB_ENUM_FIELD(task, Task)},
       "generate: new tokens (greedy or sampled); score: log-likelihoods of completions, or a prompt's perplexity; "
       "embed: one pooled hidden-state vector per prompt."},
      {"embed.pooling", EnumChoice{{"last", "mean", "cls"}, JOB_ENUM_FIELD(embed.pooling, Pooling)},
       "Embed task: the embedding is the final-normed hidden state at the prompt's last position, the mean over its "
       "positions, or its first (cls).",
       is_embed},
      {"embed.normalize", Flag{JOB_FIELD(embed.normalize)}, "Embed task: L2-normalize the pooled vector.", is_embed},
      // Empty = the tokenizer's own template; emitted only when a file is named.
      {"chat_template", Text{JOB_FIELD(chat_template)},
       "A Jinja file rendering `messages` rows, instead of the `chat_template` of the model's "
       "`tokenizer_config.json`.",
       [](const JobSpec& j) { return !j.chat_template.empty(); }},
      // Emitted only when set: files written before the key existed still resume.
      {"chat_template_kwargs", JsonMapping{JOB_FIELD(chat_template_kwargs), chat_template_kwargs_problem},
       "Further variables for the chat template of `messages` rows, as Hugging Face's `apply_chat_template(**kwargs)` "
       "takes them (`{enable_thinking: false}` for Qwen3); a row's own `chat_template_kwargs` replace them name by "
       "name.",
       [](const JobSpec& j) { return !j.chat_template_kwargs.empty(); }},
      // Emitted only when not the default: files written before the key existed still resume.
      {"reasoning", EnumChoice{{"none", "auto", "deepseek_r1", "qwen3"}, JOB_ENUM_FIELD(reasoning, Reasoning)},
       "Generate: split each row's text at the end of its `<think>` block, the reasoning to `/reasoning_text` and the "
       "answer to `/output_text`, as vLLM's reasoning parser of that name does; auto picks deepseek_r1 or qwen3 from "
       "the chat template (none when it has no `</think>`); none keeps the whole text in `/output_text`.",
       [](const JobSpec& j) { return j.reasoning != Reasoning::kNone; }},
  };
}

// The keys after `sampling:`.
std::vector<JobKey> keys_after_sampling() {
  return {
      {"output.path", Text{JOB_FIELD(output.path), TextRule::kNonEmpty},
       "The results file (HDF5), relative to the working directory. It may not be a file the job reads."},
      {"output.if_exists", EnumChoice{{"resume", "overwrite", "fail"}, JOB_ENUM_FIELD(output.if_exists, IfExists)},
       "An existing results file: resume keeps its done rows and computes only the rest; overwrite starts afresh; "
       "fail exits 2."},
      {"output.logprobs", Flag{JOB_FIELD(output.logprobs)},
       "Store each generated token's logprob in `/output_logprobs`; false leaves them empty (score rows always have "
       "them)."},
      // Emitted only when not the default: files written before the key existed still resume.
      {"output.flush_rows", Integer{JOB_FIELD(output.flush_rows), 1, int64_t{1} << 20},
       "Rows recorded between two durable appends to the results journal (appends also happen at least every "
       "second).",
       [](const JobSpec& j) { return j.output.flush_rows != OutputSpec{}.flush_rows; }},

      {"engine.max_batch_tokens", Integer{JOB_FIELD(engine.max_batch_tokens), 1},
       "Tokens per forward step (prefill chunks + decodes)."},
      {"engine.max_seqs", Integer{JOB_FIELD(engine.max_seqs), 1}, "Sequences in flight per replica."},
      {"engine.kv_cache_tokens", Integer{JOB_FIELD(engine.kv_cache_tokens), 0},
       "KV cache capacity per rank in tokens; 0 = sized from free memory. A value past what memory holds gets what "
       "memory holds, with a warning."},
      // The first three of DTypeChoice (no float16 KV cache).
      {"engine.kv_cache_dtype",
       EnumChoice{{"auto", "float32", "bfloat16"}, JOB_ENUM_FIELD(engine.kv_cache_dtype, DTypeChoice)},
       "The KV cache's dtype; auto = float32 on the CPU, bfloat16 on CUDA."},
      {"engine.memory_utilization", Number{JOB_FIELD(engine.memory_utilization), 0.0, true, 1.0},
       "The share of device memory the engine may use."},
      // The paged-attention kernels take blocks of at most 256 positions.
      {"engine.block_size", Integer{JOB_FIELD(engine.block_size), 1, 256},
       "Tokens per KV cache block (at most 256: the paged-attention kernels' limit)."},
      {"engine.threads", Integer{JOB_FIELD(engine.threads), 0, 4096},
       "A rank's BLAS and OpenMP threads; 0 = the CPUs the rank may run on (its affinity mask) divided by the most "
       "ranks of its machine sharing any of them, at least 1."},
      {"engine.progress_interval", Number{JOB_FIELD(engine.progress_interval), 0.0, false, std::nullopt},
       "Seconds between progress lines when standard error is not a terminal."},
      {"engine.admission", EnumChoice{{"fifo", "longest_first"}, JOB_ENUM_FIELD(engine.admission, AdmissionPolicy)},
       "The order in which rows read ahead are admitted to the batch."},
      {"engine.lookahead", Integer{JOB_FIELD(engine.lookahead), 1}, "Rows a replica reads ahead of what it runs."},
      {"engine.prefix_caching", Flag{JOB_FIELD(engine.prefix_caching)},
       "Rows of a replica share the cached KV blocks of equal prompt prefixes; results are the same on and off."},
      {"engine.watchdog_seconds", Number{JOB_FIELD(engine.watchdog_seconds), 0.0, false, std::nullopt},
       "A rank silent (no heartbeat) this long ends the job, naming it; 0 = off."},
  };
}

}  // namespace

const std::vector<JobKey>& job_keys() {
  static const std::vector<JobKey> keys = [] {
    std::vector<JobKey> all = keys_before_sampling();
    for (const SamplingKey& k : sampling_keys()) all.push_back({k.key, k.value, k.doc, k.emitted});
    for (JobKey& k : keys_after_sampling()) all.push_back(std::move(k));
    return all;
  }();
  return keys;
}

void KeyErrors::fail(const std::string& key, const std::string& msg) const {
  auto it = override_src_.find(key);
  if (it != override_src_.end()) throw JobError("--set " + it->second + ": " + msg);
  throw JobError(source_ + ": " + msg);
}

std::string section_of(const std::string& dotted) {
  auto dot = dotted.find('.');
  return dot == std::string::npos ? "" : dotted.substr(0, dot);
}

std::string leaf_of(const std::string& dotted) {
  auto dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

bool is_job_key(const std::string& dotted) {
  const auto& keys = job_keys();
  return std::any_of(keys.begin(), keys.end(), [&](const JobKey& k) { return dotted == k.key; });
}

bool is_job_section(const std::string& name) { return !name.empty() && !first_key_of(name).empty(); }

std::string first_key_of(const std::string& section) {
  for (const JobKey& k : job_keys())
    if (section_of(k.key) == section && section_of(k.key) != "") return leaf_of(k.key);
  return "";
}

std::vector<std::string> known_key_names() {
  std::vector<std::string> out;
  for (const JobKey& k : job_keys())
    if (section_of(k.key).empty()) out.push_back(k.key);
  std::string last;
  for (const JobKey& k : job_keys()) {
    std::string s = section_of(k.key);
    if (s.empty()) continue;
    if (s != last && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
    last = s;
    out.push_back(k.key);
  }
  return out;
}

namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') { out += "\\n"; continue; }
    out += c;
  }
  return out + "\"";
}

// A whole scalar as an integer: an optional '+', then what from_chars reads (no '-' for unsigned).
template <typename Int>
bool parse_integer(const std::string& s, Int& v) {
  if (s.empty() || (std::is_unsigned_v<Int> && s[0] == '-')) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  auto r = std::from_chars(b, e, v);
  return r.ec == std::errc() && r.ptr == e;
}

bool parse_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return false;
  return std::isfinite(v);
}

}  // namespace

std::string value_repr(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.IsNull()) return "nothing";
  const std::string& s = n.Scalar();
  double d;
  std::string l = lower(s);
  if (parse_double(s, d) || l == "true" || l == "false") return s;
  return quote(s);
}

namespace {

std::string repr(const YAML::Node& n) { return value_repr(n); }

// A leaf's node; null when absent.
YAML::Node node_of(const YAML::Node& root, const std::string& dotted) {
  auto dot = dotted.find('.');
  if (dot == std::string::npos) {
    YAML::Node v = root[dotted];
    return v ? v : YAML::Node();
  }
  YAML::Node sec = root[dotted.substr(0, dot)];
  if (!sec || !sec.IsMap()) return YAML::Node();
  YAML::Node v = sec[dotted.substr(dot + 1)];
  return v ? v : YAML::Node();
}

// Reads one key's (non-null) node into its field: one overload per kind of value.
class KeyReader {
 public:
  KeyReader(const KeyErrors& errors, const std::string& key, const YAML::Node& n, JobSpec& job)
      : errors_(errors), key_(key), n_(n), job_(job) {}

  [[noreturn]] void fail(const std::string& msg) const { errors_.fail(key_, msg); }
  [[noreturn]] void must_be(const std::string& what, const std::string& got) const {
    fail("'" + key_ + "' must be " + what + ", got " + got);
  }
  void need_scalar(const std::string& what) const {
    if (!n_.IsScalar()) must_be(what, repr(n_));
  }

  void operator()(const Text& t) const {
    if (n_.IsNull()) return;
    need_scalar("a string");
    t.field(job_) = n_.Scalar();
  }
  void operator()(const OptionalText& t) const {
    if (n_.IsNull()) return;
    need_scalar("a string");
    if (n_.Scalar().empty()) fail("'" + key_ + "' must be a non-empty string or null");
    t.field(job_) = n_.Scalar();
  }
  // The index of the (non-null) value among `choices`.
  size_t choice_index(const std::vector<std::string>& choices) const {
    need_scalar("a string");
    const std::string v = n_.Scalar();
    auto it = std::find(choices.begin(), choices.end(), v);
    if (it == choices.end()) {
      std::string list;
      for (const auto& name : choices) list += (list.empty() ? "" : ", ") + name;
      must_be("one of " + list, quote(v));
    }
    return static_cast<size_t>(it - choices.begin());
  }
  void operator()(const EnumChoice& c) const {
    if (n_.IsNull()) return;
    c.set(job_, choice_index(c.choices));
  }
  void operator()(const Integer& i) const {
    if (n_.IsNull()) return;
    std::string what = i.min == 1 ? "a positive integer" : i.min == 0 ? "a non-negative integer"
                                                         : "an integer >= " + std::to_string(i.min);
    need_scalar(what);
    int64_t v;
    if (!parse_integer(n_.Scalar(), v) || v < i.min) must_be(what, repr(n_));
    if (i.max && v > *i.max)
      must_be("an integer in [" + std::to_string(i.min) + ", " + std::to_string(*i.max) + "]", std::to_string(v));
    i.field(job_) = v;
  }
  void operator()(const Unsigned& u) const {
    if (n_.IsNull()) return;
    const std::string what = "a non-negative integer";
    need_scalar(what);
    uint64_t v;
    if (!parse_integer(n_.Scalar(), v)) must_be(what, repr(n_));
    u.field(job_) = v;
  }
  void operator()(const Number& r) const {
    if (n_.IsNull()) return;
    const std::string what = number_requirement(r);
    need_scalar(what);
    double v;
    if (!parse_double(n_.Scalar(), v) || !r.allows(v)) must_be(what, repr(n_));
    r.field(job_) = v;
  }
  void operator()(const FiniteNumber& f) const {
    if (n_.IsNull()) return;
    need_scalar("a finite number");
    double v;
    if (!parse_double(n_.Scalar(), v)) must_be("a finite number", repr(n_));
    f.field(job_) = v;
  }
  void operator()(const Flag& f) const {
    if (n_.IsNull()) return;
    need_scalar("true or false");
    bool v;
    if (!YAML::convert<bool>::decode(n_, v)) must_be("true or false", repr(n_));
    f.field(job_) = v;
  }
  void operator()(const StopStrings& s) const {
    if (n_.IsNull()) return;
    const std::string what = "a list of non-empty strings";
    std::vector<std::string> v;
    if (n_.IsScalar()) {
      v.push_back(n_.Scalar());
    } else if (n_.IsSequence()) {
      for (const auto& e : n_) {
        if (!e.IsScalar()) must_be(what, "an element that is " + repr(e));
        v.push_back(e.Scalar());
      }
    } else {
      must_be(what, repr(n_));
    }
    for (const auto& text : v)
      if (text.empty()) must_be(what, "an empty string");
    s.field(job_) = v;
  }
  void operator()(const TokenIds& t) const {
    if (n_.IsNull()) return;
    const std::string what = "a list of token ids (integers >= 0)";
    std::vector<int32_t> v;
    auto one = [&](const YAML::Node& e) {
      int64_t id;
      if (!e.IsScalar() || !parse_integer(e.Scalar(), id) || id < 0 || id > std::numeric_limits<int32_t>::max())
        must_be(what, repr(e));
      v.push_back(static_cast<int32_t>(id));
    };
    if (n_.IsSequence()) {
      for (const auto& e : n_) one(e);
    } else {
      one(n_);
    }
    t.field(job_) = v;
  }
  void operator()(const JsonMapping& m) const {
    if (n_.IsNull()) return;
    if (!n_.IsMap()) must_be("a mapping of names to values", repr(n_));
    nlohmann::ordered_json v;
    try {
      v = yaml_to_json(n_);
    } catch (const std::invalid_argument& e) {
      fail("'" + key_ + "': " + e.what());
    }
    if (m.problem)
      if (const std::string why = m.problem(v, key_); !why.empty()) fail(why);
    m.field(job_) = v.empty() ? "" : v.dump();
  }

 private:
  const KeyErrors& errors_;
  const std::string& key_;
  const YAML::Node& n_;
  JobSpec& job_;
};

// After reading: the rules on a string's emptiness, which hold for the default as well.
void check_text_rule(const JobKey& k, const KeyErrors& errors, JobSpec& job) {
  const Text* t = std::get_if<Text>(&k.value);
  if (!t || !t->field(job).empty()) return;
  const std::string key = k.key;
  if (t->rule == TextRule::kRequired) errors.fail(key, "'" + key + "' is required");
  if (t->rule == TextRule::kNonEmpty) errors.fail(key, "'" + key + "' must be a non-empty string");
}

}  // namespace

void read_job_keys(const YAML::Node& root, const KeyErrors& errors, JobSpec& job) {
  for (const JobKey& k : job_keys()) {
    const std::string key = k.key;
    const YAML::Node n = node_of(root, key);
    std::visit(KeyReader(errors, key, n, job), k.value);
    check_text_rule(k, errors, job);
  }
}

}  // namespace tpbatch
