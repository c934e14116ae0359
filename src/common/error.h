#pragma once
// One exception type for every user-facing failure. The exit code follows docs/exit-codes.md:
// 2 = bad command line or job file, 3 = bad input data the job was told to fail on, 1 = other.
#include <stdexcept>
#include <string>

namespace tpbatch {

enum ExitCode : int { kExitOk = 0, kExitFailure = 1, kExitBadJob = 2, kExitBadInput = 3 };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, int exit_code = kExitFailure)
      : std::runtime_error(what), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// A job-file or command-line error (exit 2).
inline Error JobError(const std::string& what) { return Error(what, kExitBadJob); }

}  // namespace tpbatch
