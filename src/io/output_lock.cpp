#include "io/output_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace tpbatch {

OutputLock OutputLock::acquire(const std::string& path) {
  OutputLock lock;
  lock.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock.fd_ < 0) throw Error("results file '" + path + "': cannot open: " + std::strerror(errno));
  struct flock fl{};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;  // the whole file
  if (::fcntl(lock.fd_, F_OFD_SETLK, &fl) != 0) {
    const int err = errno;
    if (err == EAGAIN || err == EACCES)
      throw JobError("output '" + path +
                     "' is locked by another running tpbatch job writing it; wait until that job ends, or choose "
                     "another output.path (this job has not touched the file)");
    if (err != ENOLCK && err != ENOSYS && err != EOPNOTSUPP && err != EINVAL)
      throw Error("results file '" + path + "': cannot lock: " + std::strerror(err));
    // A file system without locks: run unlocked, as HDF5 does with "ignore when disabled".
  }
  return lock;
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
    o.fd_ = -1;
  }
  return *this;
}

void OutputLock::release() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
  fd_ = -1;
}

int OutputLock::sync() const {
  if (fd_ < 0) return 0;
  return ::fsync(fd_) == 0 ? 0 : errno;
}

}  // namespace tpbatch
