// `tpbatch job-keys`: every job key as Markdown (docs/job-keys.md is its output).
#include <CLI/CLI.hpp>

#include <iostream>

#include "app/subcommands.h"
#include "common/error.h"
#include "job/job_keys_markdown.h"

namespace tpbatch {

Subcommand add_job_keys_subcommand(CLI::App& program) {
  auto* cmd = program.add_subcommand("job-keys", "print every job key, its values, default and meaning (Markdown)");
  return {cmd, [] {
            std::cout << job_keys_markdown();
            return kExitOk;
          }};
}

}  // namespace tpbatch
