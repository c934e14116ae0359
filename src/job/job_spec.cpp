// The job file: parsing, `--set` overrides, validation, and the effective YAML. See CONTRACT.md.
#include "job/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "common/error.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

// Every key of the job file: top-level scalars and the keys of each section, in emission order.
struct Section {
  const char* name;
  std::vector<const char*> keys;
};

const std::vector<const char*>& top_scalars() {
  static const std::vector<const char*> k = {"model", "dtype", "device", "task", "chat_template"};
  return k;
}

const std::vector<Section>& sections() {
  static const std::vector<Section> s = {
      {"parallel", {"tensor", "pipeline", "ranks_per_node"}},
      {"input", {"path", "text_field", "tokens_field", "id_field", "completion_field", "on_bad_line", "unknown_keys",
                 "score_tokenization", "truncate"}},
      {"sampling", {"max_new_tokens", "temperature", "top_k", "top_p", "seed", "stop", "ignore_eos", "min_p",
                    "repetition_penalty", "presence_penalty", "frequency_penalty", "stop_token_ids", "min_tokens",
                    "top_logprobs"}},
      {"output", {"path", "if_exists", "logprobs"}},
      {"embed", {"pooling", "normalize"}},
      {"engine",
       {"max_batch_tokens", "max_seqs", "kv_cache_tokens", "memory_utilization", "block_size", "threads",
        "progress_interval", "admission", "lookahead", "custom_allreduce", "prefix_caching", "watchdog_seconds", "kv_cache_dtype"}},
  };
  return s;
}

const Section* find_section(const std::string& name) {
  for (const auto& s : sections())
    if (name == s.name) return &s;
  return nullptr;
}

bool is_top_scalar(const std::string& k) {
  for (const char* t : top_scalars())
    if (k == t) return true;
  return false;
}

bool is_leaf_key(const std::string& dotted) {
  auto dot = dotted.find('.');
  if (dot == std::string::npos) return is_top_scalar(dotted);
  const Section* s = find_section(dotted.substr(0, dot));
  if (!s) return false;
  std::string leaf = dotted.substr(dot + 1);
  return std::any_of(s->keys.begin(), s->keys.end(), [&](const char* k) { return leaf == k; });
}

std::vector<std::string> all_keys() {
  std::vector<std::string> out;
  for (const char* t : top_scalars()) out.push_back(t);
  for (const auto& s : sections()) {
    out.push_back(s.name);
    for (const char* k : s.keys) out.push_back(std::string(s.name) + "." + k);
  }
  return out;
}

size_t levenshtein(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string leaf_of(const std::string& dotted) {
  auto dot = dotted.rfind('.');
  return dot == std::string::npos ? dotted : dotted.substr(dot + 1);
}

// " (did you mean 'x'?)" or "".
std::string suggestion(const std::string& unknown) {
  std::string best;
  size_t best_score = SIZE_MAX;
  for (const auto& cand : all_keys()) {
    size_t score = std::min(levenshtein(unknown, cand), levenshtein(leaf_of(unknown), leaf_of(cand)) + 1);
    if (score < best_score) best_score = score, best = cand;
  }
  size_t limit = std::max<size_t>(1, std::min<size_t>(3, unknown.size() / 2));
  if (best.empty() || best_score > limit) return "";
  return " (did you mean '" + best + "'?)";
}

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

bool parse_int64(const std::string& s, int64_t& v) {
  if (s.empty()) return false;
  const char* b = s.data();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  auto r = std::from_chars(b, e, v);
  return r.ec == std::errc() && r.ptr == e;
}

bool parse_uint64(const std::string& s, uint64_t& v) {
  if (s.empty() || s[0] == '-') return false;
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

// How a value looks in an error message.
std::string repr(const YAML::Node& n) {
  if (n.IsSequence()) return "a list";
  if (n.IsMap()) return "a mapping";
  if (n.IsNull()) return "nothing";
  const std::string& s = n.Scalar();
  double d;
  std::string l = lower(s);
  if (parse_double(s, d) || l == "true" || l == "false") return s;
  return quote(s);
}

class Parser {
 public:
  Parser(std::string source, std::map<std::string, std::string> override_src)
      : source_(std::move(source)), override_src_(std::move(override_src)) {}

  [[noreturn]] void fail(const std::string& key, const std::string& msg) const {
    auto it = override_src_.find(key);
    if (it != override_src_.end()) throw JobError("--set " + it->second + ": " + msg);
    throw JobError(source_ + ": " + msg);
  }

  // A leaf's node; null when absent.
  YAML::Node get(const YAML::Node& root, const std::string& dotted) const {
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

  void need_scalar(const std::string& key, const YAML::Node& n, const std::string& what) const {
    if (!n.IsScalar()) fail(key, "'" + key + "' must be " + what + ", got " + repr(n));
  }

  // min: lowest accepted value; what: e.g. "a positive integer".
  void get_int(const YAML::Node& root, const std::string& key, int64_t min, int64_t& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return;
    std::string what = min == 1 ? "a positive integer" : min == 0 ? "a non-negative integer"
                                                       : "an integer >= " + std::to_string(min);
    need_scalar(key, n, what);
    int64_t v;
    if (!parse_int64(n.Scalar(), v) || v < min) fail(key, "'" + key + "' must be " + what + ", got " + repr(n));
    out = v;
  }

  void get_u64(const YAML::Node& root, const std::string& key, uint64_t& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return;
    const std::string what = "a non-negative integer";
    need_scalar(key, n, what);
    uint64_t v;
    if (!parse_uint64(n.Scalar(), v)) fail(key, "'" + key + "' must be " + what + ", got " + repr(n));
    out = v;
  }

  // Range: lo (inclusive unless lo_open), hi (inclusive) or none.
  void get_double(const YAML::Node& root, const std::string& key, double lo, bool lo_open,
                  std::optional<double> hi, double& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return;
    std::ostringstream what;
    if (hi)
      what << "a number in " << (lo_open ? "(" : "[") << lo << ", " << *hi << "]";
    else
      what << "a number " << (lo_open ? "> " : ">= ") << lo;
    need_scalar(key, n, what.str());
    double v;
    if (!parse_double(n.Scalar(), v) || (lo_open ? v <= lo : v < lo) || (hi && v > *hi))
      fail(key, "'" + key + "' must be " + what.str() + ", got " + repr(n));
    out = v;
  }

  void get_bool(const YAML::Node& root, const std::string& key, bool& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return;
    need_scalar(key, n, "true or false");
    bool v;
    if (!YAML::convert<bool>::decode(n, v)) fail(key, "'" + key + "' must be true or false, got " + repr(n));
    out = v;
  }

  // Returns false when absent/null.
  bool get_string(const YAML::Node& root, const std::string& key, std::string& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return false;
    need_scalar(key, n, "a string");
    out = n.Scalar();
    return true;
  }

  void get_choice(const YAML::Node& root, const std::string& key, const std::vector<std::string>& choices,
                  std::string& out) const {
    std::string v;
    if (!get_string(root, key, v)) return;
    if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
      fail(key, "'" + key + "' must be one of " + list + ", got " + quote(v));
    }
    out = v;
  }

  // Any finite number (the penalties, which may be negative).
  void get_finite(const YAML::Node& root, const std::string& key, double& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return;
    need_scalar(key, n, "a finite number");
    double v;
    if (!parse_double(n.Scalar(), v)) fail(key, "'" + key + "' must be a finite number, got " + repr(n));
    out = v;
  }

  // A token id or a list of them, each in [0, 2^31).
  void get_token_ids(const YAML::Node& root, const std::string& key, std::vector<int32_t>& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return;
    const std::string what = "a list of token ids (integers >= 0)";
    std::vector<int32_t> v;
    auto one = [&](const YAML::Node& e) {
      int64_t id;
      if (!e.IsScalar() || !parse_int64(e.Scalar(), id) || id < 0 || id > std::numeric_limits<int32_t>::max())
        fail(key, "'" + key + "' must be " + what + ", got " + repr(e));
      v.push_back(static_cast<int32_t>(id));
    };
    if (n.IsSequence()) {
      for (const auto& e : n) one(e);
    } else {
      one(n);
    }
    out = v;
  }

  void get_stop(const YAML::Node& root, const std::string& key, std::vector<std::string>& out) const {
    YAML::Node n = get(root, key);
    if (n.IsNull()) return;
    const std::string what = "a list of non-empty strings";
    std::vector<std::string> v;
    if (n.IsScalar()) {
      v.push_back(n.Scalar());
    } else if (n.IsSequence()) {
      for (const auto& e : n) {
        if (!e.IsScalar()) fail(key, "'" + key + "' must be " + what + ", got an element that is " + repr(e));
        v.push_back(e.Scalar());
      }
    } else {
      fail(key, "'" + key + "' must be " + what + ", got " + repr(n));
    }
    for (const auto& s : v)
      if (s.empty()) fail(key, "'" + key + "' must be " + what + ", got an empty string");
    out = v;
  }

 private:
  std::string source_;
  std::map<std::string, std::string> override_src_;  // dotted key -> "key=value" as given
};

// Checks the shape of the tree: known keys, sections are mappings, no duplicates.
void check_structure(const YAML::Node& root, const std::string& source) {
  auto dup_check = [&](const YAML::Node& map, const std::string& prefix) {
    std::set<std::string> seen;
    for (const auto& kv : map) {
      if (!kv.first.IsScalar()) throw JobError(source + ": keys must be plain names");
      std::string k = prefix + kv.first.Scalar();
      if (!seen.insert(k).second) throw JobError(source + ": duplicate key '" + k + "'");
    }
  };
  dup_check(root, "");
  for (const auto& kv : root) {
    std::string k = kv.first.Scalar();
    if (is_top_scalar(k)) continue;
    const Section* s = find_section(k);
    if (!s) throw JobError(source + ": unknown key '" + k + "'" + suggestion(k));
    if (kv.second.IsNull()) continue;
    if (!kv.second.IsMap())
      throw JobError(source + ": '" + k + "' must be a mapping of keys (such as '" + k + "." + s->keys[0] +
                     "'), got " + repr(kv.second));
    dup_check(kv.second, k + ".");
    for (const auto& kv2 : kv.second) {
      std::string dotted = k + "." + kv2.first.Scalar();
      if (!is_leaf_key(dotted)) throw JobError(source + ": unknown key '" + dotted + "'" + suggestion(dotted));
    }
  }
}

std::string format_double(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string emit_yaml(const JobSpec& j) {
  YAML::Emitter e;
  auto d = [](double v) { return format_double(v); };
  e << YAML::BeginMap;
  e << YAML::Key << "model" << YAML::Value << j.model;
  e << YAML::Key << "dtype" << YAML::Value << j.dtype;
  e << YAML::Key << "device" << YAML::Value << j.device;
  e << YAML::Key << "parallel" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "tensor" << YAML::Value << j.parallel.tensor;
  e << YAML::Key << "pipeline" << YAML::Value << j.parallel.pipeline;
  e << YAML::Key << "ranks_per_node" << YAML::Value << j.parallel.ranks_per_node;
  e << YAML::EndMap;
  e << YAML::Key << "input" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "path" << YAML::Value << j.input.path;
  e << YAML::Key << "text_field" << YAML::Value << j.input.text_field;
  e << YAML::Key << "tokens_field" << YAML::Value;
  if (j.input.tokens_field)
    e << *j.input.tokens_field;
  else
    e << YAML::Null;
  e << YAML::Key << "id_field" << YAML::Value << j.input.id_field;
  e << YAML::Key << "completion_field" << YAML::Value << j.input.completion_field;
  e << YAML::Key << "on_bad_line" << YAML::Value << j.input.on_bad_line;
  e << YAML::Key << "unknown_keys" << YAML::Value << j.input.unknown_keys;
  e << YAML::Key << "score_tokenization" << YAML::Value << j.input.score_tokenization;
  // Only when set: files written before the key existed still resume (their job_yaml lacks it).
  if (j.input.truncate != "error") e << YAML::Key << "truncate" << YAML::Value << j.input.truncate;
  e << YAML::EndMap;
  e << YAML::Key << "task" << YAML::Value << j.task;
  if (j.task == "embed") {
    e << YAML::Key << "embed" << YAML::Value << YAML::BeginMap;
    e << YAML::Key << "pooling" << YAML::Value << j.embed.pooling;
    e << YAML::Key << "normalize" << YAML::Value << j.embed.normalize;
    e << YAML::EndMap;
  }
  if (!j.chat_template.empty()) e << YAML::Key << "chat_template" << YAML::Value << j.chat_template;
  const SamplingParams& s = j.sampling;
  e << YAML::Key << "sampling" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "max_new_tokens" << YAML::Value << s.max_new_tokens;
  e << YAML::Key << "temperature" << YAML::Value << d(s.temperature);
  e << YAML::Key << "top_k" << YAML::Value << s.top_k;
  e << YAML::Key << "top_p" << YAML::Value << d(s.top_p);
  e << YAML::Key << "seed" << YAML::Value << s.seed;
  e << YAML::Key << "stop" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const auto& st : s.stop) e << YAML::DoubleQuoted << st;
  e << YAML::EndSeq;
  e << YAML::Key << "ignore_eos" << YAML::Value << s.ignore_eos;
  e << YAML::Key << "min_p" << YAML::Value << d(s.min_p);
  e << YAML::Key << "repetition_penalty" << YAML::Value << d(s.repetition_penalty);
  e << YAML::Key << "presence_penalty" << YAML::Value << d(s.presence_penalty);
  e << YAML::Key << "frequency_penalty" << YAML::Value << d(s.frequency_penalty);
  e << YAML::Key << "stop_token_ids" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (int32_t id : s.stop_token_ids) e << id;
  e << YAML::EndSeq;
  e << YAML::Key << "min_tokens" << YAML::Value << s.min_tokens;
  e << YAML::Key << "top_logprobs" << YAML::Value << s.top_logprobs;
  e << YAML::EndMap;
  e << YAML::Key << "output" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "path" << YAML::Value << j.output.path;
  e << YAML::Key << "if_exists" << YAML::Value << j.output.if_exists;
  e << YAML::Key << "logprobs" << YAML::Value << j.output.logprobs;
  e << YAML::EndMap;
  const EngineSpec& g = j.engine;
  e << YAML::Key << "engine" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "max_batch_tokens" << YAML::Value << g.max_batch_tokens;
  e << YAML::Key << "max_seqs" << YAML::Value << g.max_seqs;
  e << YAML::Key << "kv_cache_tokens" << YAML::Value << g.kv_cache_tokens;
  e << YAML::Key << "kv_cache_dtype" << YAML::Value << g.kv_cache_dtype;
  e << YAML::Key << "memory_utilization" << YAML::Value << d(g.memory_utilization);
  e << YAML::Key << "block_size" << YAML::Value << g.block_size;
  e << YAML::Key << "threads" << YAML::Value << g.threads;
  e << YAML::Key << "progress_interval" << YAML::Value << d(g.progress_interval);
  e << YAML::Key << "admission" << YAML::Value << g.admission;
  e << YAML::Key << "lookahead" << YAML::Value << g.lookahead;
  e << YAML::Key << "custom_allreduce" << YAML::Value << g.custom_allreduce;
  e << YAML::Key << "prefix_caching" << YAML::Value << g.prefix_caching;
  e << YAML::Key << "watchdog_seconds" << YAML::Value << d(g.watchdog_seconds);
  e << YAML::EndMap;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

// A relative path: from the working directory if it is there, else from the job file's folder.
std::string resolve(const std::string& p, const fs::path& job_dir) {
  fs::path path(p);
  std::error_code ec;
  if (path.is_absolute() || fs::exists(path, ec) || job_dir.empty()) return p;
  fs::path alt = (job_dir / path).lexically_normal();
  if (fs::exists(alt, ec)) return alt.string();
  return p;
}

}  // namespace

JobSpec parse_job(const std::string& yaml_text, const std::vector<std::string>& set_overrides,
                  const fs::path& job_dir) {
  return parse_job(yaml_text, set_overrides, job_dir, "job.yaml");
}

JobSpec parse_job(const std::string& yaml_text, const std::vector<std::string>& set_overrides,
                  const fs::path& job_dir, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw JobError(source + " line " + std::to_string(e.mark.line + 1) + ": YAML syntax error: " + e.msg);
  }
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw JobError(source + ": the job file must be a YAML mapping of keys (model: ..., input: ...)");
  check_structure(root, source);

  // --set KEY=VALUE, applied to the tree before validation.
  std::map<std::string, std::string> override_src;
  for (const auto& ov : set_overrides) {
    auto eq = ov.find('=');
    if (eq == std::string::npos || eq == 0)
      throw JobError("--set '" + ov + "': expected KEY=VALUE with a dotted key, e.g. --set parallel.tensor=2");
    std::string key = ov.substr(0, eq), text = ov.substr(eq + 1);
    if (!is_leaf_key(key)) {
      if (find_section(key))
        throw JobError("--set " + ov + ": '" + key + "' is a section; set one of its keys, e.g. " + key + "." +
                       find_section(key)->keys[0] + "=...");
      throw JobError("--set " + ov + ": unknown key '" + key + "'" + suggestion(key));
    }
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception& e) {
      throw JobError("--set " + ov + ": the value is not valid YAML (" + e.msg + ")");
    }
    auto dot = key.find('.');
    if (dot == std::string::npos) {
      root[key] = value;
    } else {
      std::string sec = key.substr(0, dot), leaf = key.substr(dot + 1);
      if (!root[sec] || !root[sec].IsMap()) root[sec] = YAML::Node(YAML::NodeType::Map);
      root[sec][leaf] = value;
    }
    override_src[key] = ov;
  }

  Parser p(source, override_src);
  JobSpec j;
  if (!p.get_string(root, "model", j.model) || j.model.empty()) p.fail("model", "'model' is required");
  p.get_choice(root, "dtype", {"auto", "float32", "bfloat16", "float16"}, j.dtype);
  p.get_choice(root, "device", {"auto", "cpu", "cuda"}, j.device);
  p.get_choice(root, "task", {"generate", "score", "embed"}, j.task);
  p.get_choice(root, "embed.pooling", {"last", "mean", "cls"}, j.embed.pooling);
  p.get_bool(root, "embed.normalize", j.embed.normalize);

  p.get_int(root, "parallel.tensor", 1, j.parallel.tensor);
  p.get_int(root, "parallel.pipeline", 1, j.parallel.pipeline);
  p.get_int(root, "parallel.ranks_per_node", 0, j.parallel.ranks_per_node);

  if (!p.get_string(root, "input.path", j.input.path) || j.input.path.empty())
    p.fail("input.path", "'input.path' is required");
  for (auto [key, field] : {std::pair{"input.text_field", &j.input.text_field},
                            std::pair{"input.id_field", &j.input.id_field},
                            std::pair{"input.completion_field", &j.input.completion_field}}) {
    p.get_string(root, key, *field);
    if (field->empty()) p.fail(key, std::string("'") + key + "' must be a non-empty string");
  }
  std::string tokens_field;
  if (p.get_string(root, "input.tokens_field", tokens_field)) {
    if (tokens_field.empty()) p.fail("input.tokens_field", "'input.tokens_field' must be a non-empty string or null");
    j.input.tokens_field = tokens_field;
  }
  p.get_choice(root, "input.on_bad_line", {"record", "fail"}, j.input.on_bad_line);
  p.get_choice(root, "input.unknown_keys", {"error", "ignore"}, j.input.unknown_keys);
  p.get_choice(root, "input.score_tokenization", {"joint", "separate"}, j.input.score_tokenization);
  p.get_choice(root, "input.truncate", {"error", "left"}, j.input.truncate);
  p.get_string(root, "chat_template", j.chat_template);

  SamplingParams& s = j.sampling;
  p.get_int(root, "sampling.max_new_tokens", 0, s.max_new_tokens);
  p.get_double(root, "sampling.temperature", 0.0, false, std::nullopt, s.temperature);
  p.get_int(root, "sampling.top_k", 0, s.top_k);
  p.get_double(root, "sampling.top_p", 0.0, true, 1.0, s.top_p);
  p.get_u64(root, "sampling.seed", s.seed);
  p.get_stop(root, "sampling.stop", s.stop);
  p.get_bool(root, "sampling.ignore_eos", s.ignore_eos);
  p.get_double(root, "sampling.min_p", 0.0, false, 1.0, s.min_p);
  p.get_double(root, "sampling.repetition_penalty", 0.0, true, std::nullopt, s.repetition_penalty);
  p.get_finite(root, "sampling.presence_penalty", s.presence_penalty);
  p.get_finite(root, "sampling.frequency_penalty", s.frequency_penalty);
  p.get_token_ids(root, "sampling.stop_token_ids", s.stop_token_ids);
  p.get_int(root, "sampling.min_tokens", 0, s.min_tokens);
  p.get_int(root, "sampling.top_logprobs", 0, s.top_logprobs);
  if (s.top_logprobs > kMaxTopLogprobs)
    p.fail("sampling.top_logprobs", "'sampling.top_logprobs' must be an integer in [0, " +
                                        std::to_string(kMaxTopLogprobs) + "], got " + std::to_string(s.top_logprobs));

  p.get_string(root, "output.path", j.output.path);
  if (j.output.path.empty()) p.fail("output.path", "'output.path' must be a non-empty string");
  p.get_choice(root, "output.if_exists", {"resume", "overwrite", "fail"}, j.output.if_exists);
  p.get_bool(root, "output.logprobs", j.output.logprobs);

  EngineSpec& g = j.engine;
  p.get_int(root, "engine.max_batch_tokens", 1, g.max_batch_tokens);
  p.get_int(root, "engine.max_seqs", 1, g.max_seqs);
  p.get_int(root, "engine.kv_cache_tokens", 0, g.kv_cache_tokens);
  p.get_choice(root, "engine.kv_cache_dtype", {"auto", "float32", "bfloat16"}, g.kv_cache_dtype);
  p.get_double(root, "engine.memory_utilization", 0.0, true, 1.0, g.memory_utilization);
  p.get_int(root, "engine.block_size", 1, g.block_size);
  p.get_int(root, "engine.threads", 0, g.threads);
  p.get_double(root, "engine.progress_interval", 0.0, false, std::nullopt, g.progress_interval);
  {
    std::vector<std::string> policies(std::begin(kAdmissionPolicies), std::end(kAdmissionPolicies));
    p.get_choice(root, "engine.admission", policies, g.admission);
  }
  p.get_int(root, "engine.lookahead", 1, g.lookahead);
  p.get_bool(root, "engine.custom_allreduce", g.custom_allreduce);
  p.get_bool(root, "engine.prefix_caching", g.prefix_caching);
  p.get_double(root, "engine.watchdog_seconds", 0.0, false, std::nullopt, g.watchdog_seconds);

  // Paths: model folder and input file must exist.
  std::error_code ec;
  const std::string where = " (relative paths are taken from the working directory, else from the job file's folder)";
  {
    std::string given = j.model;
    j.model = resolve(given, job_dir);
    if (!fs::exists(j.model, ec))
      p.fail("model", "model folder '" + given + "' not found" + (fs::path(given).is_absolute() ? "" : where));
    if (!fs::is_directory(j.model, ec)) p.fail("model", "model '" + given + "' is not a folder");
  }
  {
    std::string given = j.input.path;
    j.input.path = resolve(given, job_dir);
    if (!fs::exists(j.input.path, ec))
      p.fail("input.path", "input file '" + given + "' not found" + (fs::path(given).is_absolute() ? "" : where));
    if (fs::is_directory(j.input.path, ec)) p.fail("input.path", "input file '" + given + "' is a folder");
  }

  if (!j.chat_template.empty()) {
    std::string given = j.chat_template;
    j.chat_template = resolve(given, job_dir);
    if (!fs::is_regular_file(j.chat_template, ec))
      p.fail("chat_template", "chat template file '" + given + "' not found" +
                                  (fs::path(given).is_absolute() ? "" : where));
  }

  j.effective_yaml = emit_yaml(j);
  return j;
}

JobSpec load_job(const fs::path& job_yaml, const std::vector<std::string>& set_overrides) {
  std::error_code ec;
  if (!fs::exists(job_yaml, ec)) throw JobError("job file '" + job_yaml.string() + "' not found");
  if (fs::is_directory(job_yaml, ec)) throw JobError("job file '" + job_yaml.string() + "' is a folder");
  std::ifstream in(job_yaml, std::ios::binary);
  if (!in) throw JobError("job file '" + job_yaml.string() + "' cannot be read");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (ss.str().find('\0') != std::string::npos) {
    std::string hint = job_yaml.extension() == ".h5" ? " (to summarize a results file: tpbatch inspect " +
                                                           job_yaml.string() + ")"
                                                     : "";
    throw JobError("job file '" + job_yaml.string() + "' is not a YAML text file" + hint);
  }
  return parse_job(ss.str(), set_overrides, job_yaml.parent_path(), job_yaml.string());
}

}  // namespace tpbatch
