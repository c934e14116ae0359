// Resume: comparing the job that wrote a results file with the job that resumes it.
#include "io/resume_check.h"

#include <yaml-cpp/yaml.h>

#include <map>

#include "io/output_paths.h"
#include "job/yaml_json.h"

namespace tpbatch {
namespace {

void flatten(const YAML::Node& n, const std::string& prefix, std::map<std::string, std::string>& out) {
  if ((prefix == "chat_template_kwargs" || prefix == "guided.json") && n.IsMap()) {
    // Typed values, compared as JSON: the string "false" and false render differently.
    try {
      out[prefix] = yaml_to_json(n).dump();
    } catch (const std::invalid_argument&) {
      out[prefix] = "?";
    }
  } else if (n.IsMap()) {
    for (const auto& kv : n) flatten(kv.second, prefix.empty() ? kv.first.Scalar() : prefix + "." + kv.first.Scalar(), out);
  } else if (n.IsSequence()) {
    YAML::Emitter e;
    e << YAML::Flow << n;
    out[prefix] = e.c_str();
  } else if (n.IsScalar()) {
    out[prefix] = n.Scalar();
  } else {
    out[prefix] = "~";
  }
}

// Keys whose value may change between the first run and a resumed one: results do not depend on them.
// Not the KV cache's dtype (float32 and bfloat16 KV give logprobs ~1e-2 apart) nor its size (a row
// longer than the cache stops at its bound).
bool resume_may_differ(const std::string& key) {
  if (key == "engine.kv_cache_dtype" || key == "engine.kv_cache_tokens") return false;
  return key.rfind("engine.", 0) == 0 || key.rfind("parallel.", 0) == 0 || key == "engine" || key == "parallel" ||
         key == "output.if_exists" || key == "output.path" || key == "output.flush_rows";
}

}  // namespace

std::string job_yaml_difference(const std::string& there, const std::string& here) {
  std::map<std::string, std::string> a, b;
  try {
    flatten(YAML::Load(there), "", a);
  } catch (const YAML::Exception&) {
    return "its job_yaml attribute is not valid YAML";
  }
  try {
    flatten(YAML::Load(here), "", b);
  } catch (const YAML::Exception&) {
    return "this job's YAML is not valid";
  }
  for (const auto& [k, v] : b) {
    if (resume_may_differ(k)) continue;
    auto it = a.find(k);
    if (it == a.end()) return "'" + k + "' is " + v + " here and absent there";
    // Paths spelled differently ("models/x/" and "models/x", relative and absolute) name the same file.
    const bool path = k == "model" || k == "input.path" || k == "chat_template";
    if (it->second != v && !(path && same_file(it->second, v)))
      return "'" + k + "' is " + it->second + " there and " + v + " here";
  }
  for (const auto& [k, v] : a)
    if (!resume_may_differ(k) && !b.count(k)) return "'" + k + "' is " + v + " there and absent here";
  return "";
}

}  // namespace tpbatch
