#include "io/output_paths.h"

#include <sys/stat.h>

#include <filesystem>
#include <vector>

#include "common/error.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

// `p` with every symbolic link resolved, the final one too when it dangles (a link to a results file
// not written yet); as written when it cannot be resolved.
std::string resolved(const std::string& p) {
  std::error_code ec;
  fs::path path(p);
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(path, ec)); ++hops) {
    const fs::path target = fs::read_symlink(path, ec);
    if (ec) break;
    path = target.is_absolute() ? target : path.parent_path() / target;
  }
  const fs::path out = fs::weakly_canonical(fs::absolute(path, ec), ec);
  return ec ? path.string() : out.string();
}

}  // namespace

OutputPaths output_paths(const std::string& given) {
  OutputPaths p;
  p.given = given;
  p.file = resolved(given);
  p.journal = p.file + ".journal";
  p.partial = p.file + ".partial";
  return p;
}

bool same_file(const std::string& a, const std::string& b) {
  if (resolved(a) == resolved(b)) return true;
  struct stat sa{}, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

void check_output_apart_from_inputs(const JobSpec& job, const std::string& job_file) {
  struct Read {
    std::string path, what;
  };
  std::vector<Read> reads = {{job.input.path, "the input file (input.path)"}, {job_file, "the job file"}};
  if (!job.chat_template.empty()) reads.push_back({job.chat_template, "the chat template (chat_template)"});
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(job.model, ec))
    if (!entry.is_directory(ec)) reads.push_back({entry.path().string(), "a file of the model folder (model)"});
  const OutputPaths out = output_paths(job.output.path);
  const std::pair<std::string, std::string> writes[] = {
      {out.file, ""}, {out.journal, "its journal"}, {out.partial, "the file a run builds to replace it"}};
  for (const auto& [path, role] : writes)
    for (const Read& r : reads)
      if (same_file(path, r.path))
        throw JobError("output.path '" + job.output.path + "' " +
                       (role.empty() ? "is " : "would write " + role + " '" + path + "', which is ") + r.what + " '" +
                       r.path + "': the job would destroy what it reads; choose another output.path");
}

}  // namespace tpbatch
