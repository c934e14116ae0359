#include "job/shard.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>

#include "common/error.h"

namespace tpbatch {
namespace {

// A whole decimal integer >= 0 (no sign, no spaces).
bool parse_count(const std::string& s, int64_t& v) {
  if (s.empty() || s[0] == '+' || s[0] == '-') return false;
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// The shard of a Slurm array task. Array ids need not start at 0 (--array=1-16) and may step
// (--array=0-30:2); a list of ids that is no range (--array=1,5,7) has no shard order to give.
Shard slurm_shard(const std::string& where, const std::map<std::string, std::string>& env) {
  auto get = [&](const char* name, int64_t& v) {
    auto it = env.find(name);
    if (it == env.end()) return false;
    if (!parse_count(it->second, v))
      throw JobError(where + " slurm: " + name + " is '" + it->second + "', not a non-negative integer");
    return true;
  };
  int64_t id = 0, min = 0, max = 0, count = 0, step = 1;
  if (!get("SLURM_ARRAY_TASK_ID", id))
    throw JobError(where + " slurm: SLURM_ARRAY_TASK_ID is not set: 'slurm' takes the shard from a Slurm array "
                   "job (sbatch --array=0-15); elsewhere give INDEX/COUNT");
  if (!get("SLURM_ARRAY_TASK_MIN", min) || !get("SLURM_ARRAY_TASK_COUNT", count))
    throw JobError(where + " slurm: SLURM_ARRAY_TASK_ID is set but SLURM_ARRAY_TASK_MIN or SLURM_ARRAY_TASK_COUNT "
                   "is not; give INDEX/COUNT");
  get("SLURM_ARRAY_TASK_STEP", step);
  if (!get("SLURM_ARRAY_TASK_MAX", max)) max = min + (count - 1) * step;
  if (count < 1 || step < 1 || max < min || (max - min) % step != 0 || (max - min) / step + 1 != count ||
      id < min || id > max || (id - min) % step != 0)
    throw JobError(where + " slurm: the array's task ids (" + std::to_string(count) + " of them, " +
                   std::to_string(min) + " to " + std::to_string(max) + " in steps of " + std::to_string(step) +
                   ", this one " + std::to_string(id) + ") are not one evenly stepped range, so they name no shard "
                   "order; use --array=0-N (or give INDEX/COUNT)");
  return Shard{(id - min) / step, count};
}

}  // namespace

Shard parse_shard(const std::string& text, const std::string& where, const std::map<std::string, std::string>& env) {
  if (text.empty()) return Shard{};
  if (text == "slurm") return slurm_shard(where, env);
  const std::string form = " (INDEX/COUNT with 0 <= INDEX < COUNT, e.g. 3/16, or slurm)";
  const size_t slash = text.find('/');
  int64_t index = 0, count = 0;
  if (slash == std::string::npos || !parse_count(text.substr(0, slash), index) ||
      !parse_count(text.substr(slash + 1), count))
    throw JobError(where + " '" + text + "' is not a shard" + form);
  if (count == 0) throw JobError(where + " '" + text + "': the shard count must be at least 1" + form);
  if (index >= count)
    throw JobError(where + " '" + text + "': shard index " + std::to_string(index) + " is not below the count " +
                   std::to_string(count) + " (shards count from 0)");
  return Shard{index, count};
}

std::map<std::string, std::string> slurm_array_env() {
  std::map<std::string, std::string> env;
  for (const char* name : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                           "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_STEP"})
    if (const char* v = std::getenv(name)) env[name] = v;
  return env;
}

IndexRange lines_of_shard(const Shard& shard, int64_t lines) {
  // 128-bit products: lines * count may pass 2^63 for no input anyone has, but cannot wrap.
  auto cut = [&](int64_t i) {
    return static_cast<int64_t>(static_cast<__int128>(lines) * i / shard.count);
  };
  return IndexRange{cut(shard.index), cut(shard.index + 1)};
}

std::string shard_label(const Shard& shard) {
  const size_t width = std::max<size_t>(4, std::to_string(shard.count).size());
  auto pad = [&](int64_t v) {
    std::string s = std::to_string(v);
    return std::string(width - std::min(width, s.size()), '0') + s;
  };
  return pad(shard.index) + "-of-" + pad(shard.count);
}

std::string shard_output_path(const std::string& path, const Shard& shard) {
  static const std::string kPlaceholder = "{shard}";
  const size_t at = path.find(kPlaceholder);
  if (!shard.sharded()) {
    if (at != std::string::npos)
      throw JobError("output.path '" + path + "' has a {shard} placeholder, but the job is not sharded "
                     "(input.shard or --shard names the shard)");
    return path;
  }
  if (at != std::string::npos) {
    std::string out = path;
    for (size_t p = at; p != std::string::npos; p = out.find(kPlaceholder, p))
      out.replace(p, kPlaceholder.size(), shard_label(shard));
    return out;
  }
  const std::filesystem::path p(path);
  const std::string ext = p.extension().string();  // "" for "results" or ".hidden"
  const std::string stem = path.substr(0, path.size() - ext.size());
  return stem + ".shard-" + shard_label(shard) + ext;
}

}  // namespace tpbatch
