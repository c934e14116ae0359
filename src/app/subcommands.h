#pragma once
// The command line's subcommands. Each registers its own arguments on the program's CLI::App
// (one file each: subcommand_<name>.cpp) and returns what runs it once the line is parsed, so
// main() only picks the one given.
#include <functional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace tpbatch {

struct Subcommand {
  CLI::App* app = nullptr;    // parsed: *app is true when this subcommand was given
  std::function<int()> run;   // returns the process exit code; throws Error on bad use or input
};

Subcommand add_run_subcommand(CLI::App& program);
Subcommand add_plan_subcommand(CLI::App& program);
Subcommand add_inspect_subcommand(CLI::App& program);
Subcommand add_make_model_subcommand(CLI::App& program);
Subcommand add_export_subcommand(CLI::App& program);
Subcommand add_merge_subcommand(CLI::App& program);
Subcommand add_render_chat_subcommand(CLI::App& program);
Subcommand add_job_keys_subcommand(CLI::App& program);

// Every subcommand, registered on `program` in the order `--help` lists them.
std::vector<Subcommand> add_subcommands(CLI::App& program);

// "run" and the other names: a first argument that is none of them (nor an option) is a job file,
// and `tpbatch JOB.yaml` means `tpbatch run JOB.yaml`.
bool is_subcommand_name(const std::string& word);

// A damaged results file can crash libhdf5 itself: a fatal signal then names the file, at least.
void name_fatal_signals_while_reading_results(const std::string& path);

}  // namespace tpbatch
