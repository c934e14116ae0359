#include "io/file_commit.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "common/error.h"

namespace tpbatch {
namespace {

[[noreturn]] void fail(const std::string& name, const std::string& what, int err) {
  throw Error("results file '" + name + "': " + what + ": " + std::strerror(err));
}

class Fd {
 public:
  Fd(const std::string& path, int flags, const std::string& name) : fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
    if (fd_ < 0) fail(name, "cannot open '" + path + "'", errno);
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

void sync_file(const std::string& path, const std::string& name) {
  Fd fd(path, O_RDONLY, name);
  if (::fsync(fd.get()) != 0) fail(name, "cannot write '" + path + "' to the disk", errno);
}

void sync_folder_of(const std::string& path, const std::string& name) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  Fd fd(folder, O_RDONLY | O_DIRECTORY, name);
  // Some file systems cannot sync a folder (EINVAL): their renames are as durable as they get.
  if (::fsync(fd.get()) != 0 && errno != EINVAL) fail(name, "cannot sync the folder '" + folder + "'", errno);
}

void commit_by_rename(const std::string& from, const std::string& to, const std::string& name) {
  sync_file(from, name);
  if (std::rename(from.c_str(), to.c_str()) != 0) fail(name, "cannot rename '" + from + "' to '" + to + "'", errno);
  sync_folder_of(to, name);
}

void copy_file(const std::string& from, const std::string& to, const std::string& name) {
  Fd in(from, O_RDONLY, name);
  Fd out(to, O_WRONLY | O_CREAT | O_TRUNC, name);
  // copy_file_range copies inside the kernel (and shares extents where the file system can); where it
  // cannot (EXDEV, ENOSYS, EINVAL on some file systems), a plain read/write loop.
  for (;;) {
    const ssize_t n = ::copy_file_range(in.get(), nullptr, out.get(), nullptr, size_t{1} << 30, 0);
    if (n == 0) return;
    if (n > 0) continue;
    if (errno == EINTR) continue;
    if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
      fail(name, "cannot copy '" + from + "' to '" + to + "'", errno);
    break;
  }
  std::vector<char> buf(size_t{1} << 20);
  for (;;) {
    const ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n == 0) return;
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(name, "cannot read '" + from + "'", errno);
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(out.get(), buf.data() + done, static_cast<size_t>(n - done));
      if (w < 0) {
        if (errno == EINTR) continue;
        fail(name, "cannot write '" + to + "'", errno);
      }
      done += w;
    }
  }
}

}  // namespace tpbatch
