// The job file: its structure, `--set` overrides and paths; the keys themselves are read and emitted
// from the table in job_keys.cpp. See docs/job.md.
#include "job/job_spec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/error.h"
#include "common/read_text.h"
#include "guided/constraint.h"
#include "job/job_keys.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

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

// " (did you mean 'x'?)" or "".
std::string suggestion(const std::string& unknown) {
  std::string best;
  size_t best_score = SIZE_MAX;
  for (const auto& cand : known_key_names()) {
    size_t score = std::min(levenshtein(unknown, cand), levenshtein(leaf_of(unknown), leaf_of(cand)) + 1);
    if (score < best_score) best_score = score, best = cand;
  }
  size_t limit = std::max<size_t>(1, std::min<size_t>(3, unknown.size() / 2));
  if (best.empty() || best_score > limit) return "";
  return " (did you mean '" + best + "'?)";
}

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
    if (k.find('.') == std::string::npos && is_job_key(k)) continue;  // a top-level key
    if (!is_job_section(k)) throw JobError(source + ": unknown key '" + k + "'" + suggestion(k));
    if (kv.second.IsNull()) continue;
    if (!kv.second.IsMap())
      throw JobError(source + ": '" + k + "' must be a mapping of keys (such as '" + k + "." + first_key_of(k) +
                     "'), got " + value_repr(kv.second));
    dup_check(kv.second, k + ".");
    for (const auto& kv2 : kv.second) {
      std::string dotted = k + "." + kv2.first.Scalar();
      if (!is_job_key(dotted)) throw JobError(source + ": unknown key '" + dotted + "'" + suggestion(dotted));
    }
  }
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

// One function: the load's steps in the order its errors are reported (YAML, --set, keys, paths, shard, output).
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
    if (!is_job_key(key)) {
      if (is_job_section(key))
        throw JobError("--set " + ov + ": '" + key + "' is a section; set one of its keys, e.g. " + key + "." +
                       first_key_of(key) + "=...");
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

  KeyErrors errors(source, override_src);
  JobSpec j;
  read_job_keys(root, errors, j);
  if (const std::string why = guided::constraint_problem(j.sampling.guided); !why.empty()) {
    // "guided_regex: ..." names the row key; the job file's is "guided.regex".
    const std::string key = why.rfind("guided_", 0) == 0 ? "guided." + why.substr(7, why.find(':') - 7) : "guided";
    errors.fail(key, "'" + key + "': " + why.substr(why.find(": ") + 2));
  }
  if (j.sampling.n > 1 && j.task != Task::kGenerate)
    errors.fail("sampling.n", "'sampling.n' is " + std::to_string(j.sampling.n) + ", but several samples of a "
                "prompt need task: generate (this job's task is " + task_name(j.task) + ")");

  // Paths: model folder and input file must exist.
  std::error_code ec;
  const std::string where = " (relative paths are taken from the working directory, else from the job file's folder)";
  {
    std::string given = j.model;
    j.model = resolve(given, job_dir);
    if (!fs::exists(j.model, ec))
      errors.fail("model", "model folder '" + given + "' not found" + (fs::path(given).is_absolute() ? "" : where));
    if (!fs::is_directory(j.model, ec)) errors.fail("model", "model '" + given + "' is not a folder");
  }
  {
    std::string given = j.input.path;
    j.input.path = resolve(given, job_dir);
    if (!fs::exists(j.input.path, ec))
      errors.fail("input.path", "input file '" + given + "' not found" + (fs::path(given).is_absolute() ? "" : where));
    if (fs::is_directory(j.input.path, ec)) errors.fail("input.path", "input file '" + given + "' is a folder");
  }

  if (!j.chat_template.empty()) {
    std::string given = j.chat_template;
    j.chat_template = resolve(given, job_dir);
    if (!fs::is_regular_file(j.chat_template, ec))
      errors.fail("chat_template", "chat template file '" + given + "' not found" +
                                  (fs::path(given).is_absolute() ? "" : where));
  }

  try {
    j.shard = parse_shard(j.input.shard, "input.shard", slurm_array_env());
  } catch (const Error& e) {
    errors.fail("input.shard", e.what());
  }

  j.effective_yaml = emit_job_yaml(j);
  // After the effective YAML, which names the whole job's output.path (what the merged file takes).
  try {
    j.output.path = shard_output_path(j.output.path, j.shard);
  } catch (const Error& e) {
    errors.fail("output.path", e.what());
  }
  return j;
}

JobSpec load_job(const fs::path& job_yaml, const std::vector<std::string>& set_overrides) {
  std::error_code ec;
  if (!fs::exists(job_yaml, ec)) throw JobError("job file '" + job_yaml.string() + "' not found");
  if (fs::is_directory(job_yaml, ec)) throw JobError("job file '" + job_yaml.string() + "' is a folder");
  std::optional<std::string> text = try_read_text(job_yaml);
  if (!text) throw JobError("job file '" + job_yaml.string() + "' cannot be read");
  if (text->find('\0') != std::string::npos) {
    std::string hint = job_yaml.extension() == ".h5" ? " (to summarize a results file: tpbatch inspect " +
                                                           job_yaml.string() + ")"
                                                     : "";
    throw JobError("job file '" + job_yaml.string() + "' is not a YAML text file" + hint);
  }
  return parse_job(*text, set_overrides, job_yaml.parent_path(), job_yaml.string());
}

}  // namespace tpbatch
