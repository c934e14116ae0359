#pragma once
// An exclusive lock on the results file, taken BEFORE the file is created, truncated or reopened,
// and held until the writer closes it. HDF5's own lock comes too late for `if_exists: overwrite`
// (H5Fcreate truncates the file, then locks it), so a second job on the same output would wipe a
// running job's rows; with this lock the second job fails and the running job's file is intact.
// The lock is an open-file-description record lock (fcntl F_OFD_SETLK) on the whole file:
// independent of the flock(2) locks HDF5 readers take (h5py, `tpbatch inspect` takes none), so a
// running job's file stays readable, while a second writer (another process, or another open in
// this one) is refused.
#include <string>

namespace tpbatch {

class OutputLock {
 public:
  OutputLock() = default;
  // Opens (creating it empty if absent, never truncating) and locks path. Throws JobError (exit 2)
  // when another writer holds the lock, Error when the path cannot be opened. On file systems
  // without lock support the job runs unlocked.
  static OutputLock acquire(const std::string& path);
  // True when some process holds the lock on path (a job is writing it); false on any doubt.
  static bool held_by_other(const std::string& path);
  OutputLock(OutputLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  OutputLock& operator=(OutputLock&& o) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock() { release(); }
  void release();
  // fsync(2) of the file: whatever HDF5 has written so far is on the disk when it returns.
  // Returns 0 or errno.
  int sync() const;

 private:
  int fd_ = -1;
};

}  // namespace tpbatch
