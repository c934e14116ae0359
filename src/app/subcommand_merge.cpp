// `tpbatch merge OUT.h5 PARTS.h5... [--force]`: io/merge_results.h
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "app/subcommands.h"
#include "io/merge_results.h"

namespace tpbatch {

Subcommand add_merge_subcommand(CLI::App& program) {
  auto mo = std::make_shared<MergeOptions>();
  auto* cmd = program.add_subcommand("merge", "join the results files of a sharded job's shards into one");
  cmd->add_option("output", mo->output, "the merged results file")->required();
  cmd->add_option("parts", mo->parts, "every shard's results file")->required();
  cmd->add_flag("--force", mo->force, "replace an existing output file");
  return {cmd, [mo] { return merge_results(*mo, std::cout); }};
}

}  // namespace tpbatch
