#include "io/output_lock.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace tpbatch {

OutputLock OutputLock::acquire(const std::string& path, const std::string& output) {
  for (int attempt = 0;; ++attempt) {
    OutputLock lock;
    lock.path_ = path;
    lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lock.fd_ < 0) throw Error("results file '" + output + "': cannot open '" + path + "': " + std::strerror(errno));
    struct flock fl{};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;  // the whole file
    if (::fcntl(lock.fd_, F_OFD_SETLK, &fl) != 0) {
      const int err = errno;
      if (err == EAGAIN || err == EACCES)
        throw JobError("output '" + output +
                       "' is locked by another running tpbatch job writing it; wait until that job ends, or choose "
                       "another output.path (this job has not touched the file)");
      if (err != ENOLCK && err != ENOSYS && err != EOPNOTSUPP && err != EINVAL)
        throw Error("results file '" + output + "': cannot lock '" + path + "': " + std::strerror(err));
      return lock;  // a file system without locks: run unlocked, as HDF5 does with "ignore when disabled"
    }
    // The lock holds only if the file locked is still the one at the path: a run that just ended
    // deletes its journal while holding the lock.
    struct stat held{}, now{};
    if (::fstat(lock.fd_, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_dev == now.st_dev &&
        held.st_ino == now.st_ino)
      return lock;
    if (attempt >= 100) throw Error("results file '" + output + "': its lock file '" + path + "' keeps being replaced");
  }
}

bool OutputLock::held_by_other(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  const bool held = ::fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
  ::close(fd);
  return held;
}

OutputLock& OutputLock::operator=(OutputLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

void OutputLock::release() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
  fd_ = -1;
}

void OutputLock::remove_and_release() {
  if (fd_ >= 0) ::unlink(path_.c_str());
  release();
}

}  // namespace tpbatch
