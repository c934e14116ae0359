// tpbatch: an MPI-launched batch inference job runner.
//   tpbatch JOB.yaml | tpbatch run JOB.yaml [--set KEY=VALUE ...] [--shard INDEX/COUNT|slurm]
//   tpbatch plan JOB.yaml [--preset h100|h200|a100|cpu] [--world-size N] [--ranks-per-node N] [--device-memory GiB] [--device cpu|cuda] [--json]
//   tpbatch inspect RESULTS.h5
//   tpbatch merge OUT.h5 PARTS.h5... [--force]
//   tpbatch make-model DIR [--preset tiny|125m|8b ...]
//   tpbatch export RESULTS.h5 --format openai|jsonl [--output FILE] [--input FILE.jsonl]
//   tpbatch render-chat --template FILE --messages FILE.json [--bos-token T] [--eos-token T]
//   tpbatch job-keys
// Each subcommand registers its own arguments: app/subcommand_<name>.cpp.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "app/subcommands.h"
#include "backend/cpu/gemm/blas_core.h"
#include "common/error.h"
#include "common/log.h"
#include "common/version.h"
#ifdef TPBATCH_HAVE_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace {

std::string version_line() {
  using namespace tpbatch;
#if defined(TPBATCH_CUDA_EMULATED)
  return std::string("tpbatch ") + version() + " (CUDA backend on the EMULATED device: " + cuda_build_info() + ")";
#elif defined(TPBATCH_HAVE_CUDA)
  return std::string("tpbatch ") + version() + " (CUDA backend: " + cuda_build_info() + ")";
#else
  return std::string("tpbatch ") + version();
#endif
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tpbatch;
  // `tpbatch JOB.yaml` is `tpbatch run JOB.yaml`.
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && !is_subcommand_name(args[0]) && args[0].rfind("-", 0) != 0) args.insert(args.begin(), "run");
  // Only the commands that compute (a job, plan's calibration) need the faster BLAS core and
  // OpenMP settings that a restart brings; the file tools start once.
  if (!args.empty() && (args[0] == "run" || args[0] == "plan")) ensure_fast_blas_core(argv);

  CLI::App app{"tpbatch: MPI batch inference for decoder-only transformers", "tpbatch"};
  app.set_version_flag("--version,-V", version_line());
  app.require_subcommand(1);
  const std::vector<Subcommand> subcommands = add_subcommands(app);

  std::vector<char*> cargv{argv[0]};
  for (auto& a : args) cargv.push_back(a.data());
  try {
    app.parse(static_cast<int>(cargv.size()), cargv.data());
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitBadJob;
  }

  try {
    for (const Subcommand& s : subcommands)
      if (*s.app) return s.run();
  } catch (const Error& e) {
    log_error("%s", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    log_error("%s", e.what());
    return kExitFailure;
  }
  return kExitOk;
}
