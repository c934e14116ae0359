#include "app/subcommands.h"

#include <CLI/CLI.hpp>

#include <set>

#include "reliability/shutdown.h"

namespace tpbatch {

std::vector<Subcommand> add_subcommands(CLI::App& program) {
  return {add_run_subcommand(program),    add_plan_subcommand(program),  add_inspect_subcommand(program),
          add_make_model_subcommand(program), add_export_subcommand(program), add_merge_subcommand(program),
          add_render_chat_subcommand(program), add_job_keys_subcommand(program)};
}

bool is_subcommand_name(const std::string& word) {
  static const std::set<std::string> kNames = {"run",    "plan",  "inspect", "make-model", "render-chat",
                                               "export", "merge", "job-keys"};
  return kNames.count(word) > 0;
}

void name_fatal_signals_while_reading_results(const std::string& path) {
  name_fatal_signals_while("reading results file '" + path + "': it is damaged or not a results file tpbatch wrote");
}

}  // namespace tpbatch
