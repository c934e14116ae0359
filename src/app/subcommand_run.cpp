// `tpbatch run JOB.yaml [--set KEY=VALUE ...] [--shard INDEX/COUNT|slurm]`
#include <CLI/CLI.hpp>

#include <memory>

#include "app/run_job.h"
#include "app/subcommands.h"
#include "common/error.h"
#include "job/shard.h"

namespace tpbatch {

Subcommand add_run_subcommand(CLI::App& program) {
  struct Args {
    std::string job;
    std::vector<std::string> sets;
    std::string shard;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = program.add_subcommand("run", "run a job (also: tpbatch JOB.yaml)");
  cmd->add_option("job", a->job, "job file (YAML)")->required();
  cmd->add_option("--set", a->sets, "override a job key: --set parallel.tensor=4 (repeatable)");
  auto* shard = cmd->add_option("--shard", a->shard,
                                "run one shard of the input: INDEX/COUNT (0-based), or slurm (the array task's); "
                                "= --set input.shard=...");
  return {cmd, [a, shard] {
            if (shard->count() > 0) {  // checked here, so that a bad value is named as --shard
              if (a->shard.empty()) throw JobError("--shard '': give INDEX/COUNT (e.g. 3/16) or slurm");
              parse_shard(a->shard, "--shard", slurm_array_env());
              a->sets.push_back("input.shard=" + a->shard);  // last: it overrides the job file's and --set's
            }
            return run_job(a->job, a->sets);
          }};
}

}  // namespace tpbatch
