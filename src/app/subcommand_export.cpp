// `tpbatch export RESULTS.h5 --format openai|jsonl [--output FILE] [--input FILE.jsonl]`: app/export_command.h
#include <CLI/CLI.hpp>

#include <iostream>
#include <memory>

#include "app/export_command.h"
#include "app/subcommands.h"
#include "reliability/shutdown.h"

namespace tpbatch {

Subcommand add_export_subcommand(CLI::App& program) {
  auto ex = std::make_shared<ExportOptions>();
  auto* cmd = program.add_subcommand("export", "write a results file as JSON lines (OpenAI Batch API output or plain)");
  cmd->add_option("results", ex->results, "results file (HDF5)")->required();
  cmd->add_option("--format", ex->format, "openai | jsonl")->check(CLI::IsMember({"openai", "jsonl"}))->capture_default_str();
  cmd->add_option("--output,-o", ex->output, "output file (default or -: standard output)");
  cmd->add_option("--input", ex->input,
                  "the job's input file (default: where the job read it, or where it lay relative to the results file)");
  return {cmd, [ex] {
            name_fatal_signals_while_reading_results(ex->results);
            return run_export(*ex, std::cout);
          }};
}

}  // namespace tpbatch
