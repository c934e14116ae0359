#include "io/input_snapshot.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "io/input_row.h"

namespace tpbatch {
namespace {

const char* kind_of(mode_t m) {
  if (S_ISFIFO(m)) return "a pipe or FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a folder";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

struct stat stat_of(const std::string& path) {
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0)
    throw JobError("input file '" + path + "' cannot be opened: " + std::strerror(errno));
  return st;
}

}  // namespace

InputSnapshot snapshot_input(const std::string& path, const JobSpec& job) {
  const struct stat before = stat_of(path);
  if (!S_ISREG(before.st_mode))
    throw JobError("input file '" + path + "' is " + kind_of(before.st_mode) +
                   ": tpbatch needs a regular file (it reads the input more than once: to count and fingerprint "
                   "the rows, then to run them, and again to resume); save the rows to a file first");
  InputSnapshot s;
  s.fingerprint = input_fingerprint(path);
  JsonlReader reader(path);
  for (std::string line; reader.next(line);) s.rows += samples_of_line(line, job);
  s.lines = reader.lines_read();
  const struct stat after = stat_of(path);
  if (after.st_size != before.st_size || after.st_mtim.tv_sec != before.st_mtim.tv_sec ||
      after.st_mtim.tv_nsec != before.st_mtim.tv_nsec || after.st_ino != before.st_ino)
    throw Error("input file '" + path + "' changed while tpbatch was reading it at start; run the job on an input "
                "that no process is writing");
  s.shard_lines = lines_of_shard(job.shard, s.lines);
  s.shard_rows = s.shard_lines;
  if (s.rows != s.lines) {  // rows follow lines unevenly: count the rows before and in the shard's lines
    JsonlReader again(path);
    int64_t row = 0;
    std::string line;
    for (int64_t i = 0; i < s.shard_lines.end && again.next(line); ++i) {
      if (i == s.shard_lines.begin) s.shard_rows.begin = row;
      row += samples_of_line(line, job);
    }
    if (s.shard_lines.begin == s.shard_lines.end) s.shard_rows.begin = row;
    s.shard_rows.end = row;
  }
  return s;
}

}  // namespace tpbatch
