// `tpbatch inspect RESULTS.h5`: a results file's summary.
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "app/subcommands.h"
#include "common/error.h"
#include "io/inspect_results.h"
#include "reliability/shutdown.h"

namespace tpbatch {

Subcommand add_inspect_subcommand(CLI::App& program) {
  auto results = std::make_shared<std::string>();
  auto* cmd = program.add_subcommand("inspect", "summarize a results file");
  cmd->add_option("results", *results, "results file (HDF5)")->required();
  return {cmd, [results] {
            name_fatal_signals_while_reading_results(*results);
            inspect_results(*results, std::cout);
            return kExitOk;
          }};
}

}  // namespace tpbatch
