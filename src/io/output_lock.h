#pragma once
// An exclusive lock on a job's output, taken BEFORE anything at the output is created, replaced or
// reopened, and held until the writer ends: a second job on the same output fails instead of
// replacing the running job's file. The lock is an open-file-description record lock (fcntl
// F_OFD_SETLK) on the output's journal file (row_journal.h), which exists while a run writes the
// output and is deleted, still locked, when the run commits: a lock taken on a journal that was
// deleted or replaced meanwhile is let go and taken again on the file now at the path. It is
// independent of the flock(2) locks HDF5 readers take (h5py, `tpbatch inspect` takes none), so the
// results file stays readable, while a second writer (another process, or another open in this
// one) is refused.
#include <string>

namespace tpbatch {

class OutputLock {
 public:
  OutputLock() = default;
  // Opens (creating it empty if absent, never truncating) and locks path. Throws JobError (exit 2)
  // naming `output` when another writer holds the lock, Error when the path cannot be opened. On file
  // systems without lock support the job runs unlocked.
  static OutputLock acquire(const std::string& path, const std::string& output);
  // True when some process holds the lock on path (a job is writing its output); false on any doubt.
  static bool held_by_other(const std::string& path);
  OutputLock(OutputLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  OutputLock& operator=(OutputLock&& o) noexcept;
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;
  ~OutputLock() { release(); }
  void release();
  // Deletes the locked file, then lets the lock go (a job waiting on the old file takes it again
  // on a new one).
  void remove_and_release();

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace tpbatch
