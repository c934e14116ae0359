#include "app/collective_check.h"

#include <mpi.h>

#include <cstdio>
#include <string>

#include "common/error.h"

namespace tpbatch {

int collective_check(const std::function<void()>& fn) {
  int code = 0;
  std::string message;
  try {
    fn();
  } catch (const Error& e) {
    code = e.exit_code();
    message = e.what();
  } catch (const std::exception& e) {
    code = kExitFailure;
    message = e.what();
  }
  int rank = 0, worst = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (worst == 0) return 0;
  int reporter = code ? rank : INT32_MAX, first = 0;
  MPI_Allreduce(&reporter, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (rank == first) {
    std::fprintf(stderr, "tpbatch: error: %s\n", message.c_str());
    std::fflush(stderr);
  }
  return worst;
}

}  // namespace tpbatch
