// `tpbatch export` (export_command.h): the command line, where the job's input and model are now,
// and the rows in order; the OpenAI format itself is io/openai_batch_output.h's.
#include "app/export_command.h"

#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/error.h"
#include "common/log.h"
#include "io/finish_reason.h"
#include "io/input_row.h"
#include "io/openai_batch_output.h"
#include "io/output_paths.h"
#include "io/results_reader.h"
#include "job/job_spec.h"

namespace tpbatch {
namespace {

using ojson = nlohmann::ordered_json;

// Where a file the job named may be now, with how each place was found: as the job named it (from
// the working directory), where it lay relative to the job's output.path (so a folder moved or
// copied with its input and results in it still works), and its file name in the results file's
// folder.
std::vector<std::pair<std::string, std::string>> places_of(const std::string& stored, const std::string& output_path,
                                                           const std::string& results) {
  namespace fs = std::filesystem;
  if (stored.empty()) return {};
  const fs::path p(stored), folder = fs::path(results).parent_path();
  std::vector<std::pair<std::string, std::string>> out = {{stored, "as the job named it"}};
  const fs::path job_out_folder = fs::path(output_path).parent_path();
  if (!output_path.empty() && p.is_absolute() == job_out_folder.is_absolute()) {
    const fs::path rel = p.lexically_relative(job_out_folder.empty() ? fs::path(".") : job_out_folder);
    if (!rel.empty()) out.emplace_back((folder / rel).lexically_normal().string(), "where it lay relative to the results file");
  }
  out.emplace_back((folder / p.filename()).string(), "beside the results file");
  return out;
}

// The job's input for an openai export, and how it was found: --input; else the first of the
// places the results file points at (its `input_path` attribute, where the run read it; the job's
// input.path, see places_of) holding the file the rows were computed from (its fingerprint).
struct FoundInput {
  std::string path, how;
};
FoundInput find_input(const ExportOptions& o, const ResultsReader& f, const std::string& stored,
                      const std::string& output_path) {
  const std::string there = f.text_attribute("input_fingerprint");
  auto fingerprint = [](const std::string& path) {
    try {
      return input_fingerprint(path);
    } catch (const Error&) {
      return std::string();
    }
  };
  auto not_the_one = [&](const std::string& path, const std::string& here) {
    return "input file '" + path + "' is not the one '" + o.results + "' was computed from (its fingerprint is " +
           here + ", the results were computed from " + there + "): its lines would label other rows";
  };
  if (!o.input.empty()) {
    if (!there.empty()) {
      std::string here;
      try {
        here = input_fingerprint(o.input);
      } catch (const Error& e) {
        throw JobError(std::string(e.what()) + " (--input names the job's input file)");
      }
      if (here != there) throw JobError(not_the_one(o.input, here) + "; give --input with the job's input file as it was");
    }
    return {o.input, "--input"};
  }
  std::vector<std::pair<std::string, std::string>> places;  // path, how it was found
  if (const std::string read_at = f.text_attribute("input_path"); !read_at.empty())
    places.emplace_back(read_at, "where the job read it");
  for (auto& place : places_of(stored, output_path, o.results)) places.push_back(std::move(place));
  if (places.empty()) throw JobError("'" + o.results + "' does not name its input file: give --input FILE.jsonl");
  std::string tried, mismatch;
  std::error_code ec;
  for (const auto& [path, how] : places) {
    if (tried.find("'" + path + "'") != std::string::npos) continue;
    tried += (tried.empty() ? "'" : ", '") + path + "'";
    if (!std::filesystem::is_regular_file(path, ec)) continue;
    const std::string here = fingerprint(path);
    if (there.empty() || here == there) return {path, how};
    if (mismatch.empty()) mismatch = not_the_one(path, here);
  }
  if (!mismatch.empty())
    throw JobError(mismatch + " (looked at " + tried + "); give --input with the job's input file as it was");
  throw JobError("cannot find the job's input file (looked at " + tried + "); give --input FILE.jsonl");
}

// What export takes from the job the results file records (its job_yaml).
struct JobSettings {
  std::string input_path, id_field = "id", output_path;  // input.path, input.id_field, output.path
  int64_t samples_per_line = 1;                            // sampling.n
  bool reasoning = false;                                  // reasoning: a parser split /reasoning_text off
};

JobSettings job_settings(const ResultsReader& f) {
  JobSettings s;
  const std::string yaml = f.text_attribute("job_yaml");
  if (yaml.empty()) return s;
  try {
    const YAML::Node y = YAML::Load(yaml);
    if (y["input"] && y["input"]["path"]) s.input_path = y["input"]["path"].as<std::string>();
    if (y["input"] && y["input"]["id_field"]) s.id_field = y["input"]["id_field"].as<std::string>();
    if (y["output"] && y["output"]["path"]) s.output_path = y["output"]["path"].as<std::string>();
    if (y["sampling"] && y["sampling"]["n"]) s.samples_per_line = y["sampling"]["n"].as<int64_t>();
    if (y["reasoning"]) s.reasoning = y["reasoning"].as<std::string>() != "none";
  } catch (const YAML::Exception&) {
  }
  return s;
}

// No export may write over what it reads: the results file, its companions, the job's input.
void refuse_output_over_inputs(const ExportOptions& o, const std::string& in_path) {
  const OutputPaths results = output_paths(o.results);
  for (const std::string& read : {results.file, results.journal, results.partial, in_path})
    if (!read.empty() && same_file(o.output, read))
      throw JobError("export --output '" + o.output + "' is '" + read + "', which export reads (" +
                     (read == in_path ? "the job's input file" : "the results file or its companions") +
                     "): writing it would destroy it; choose another --output");
}

// The jsonl format: every dataset of the row, as stored.
void write_jsonl_row(std::ostream& out, const RowResult& r, bool done, const OptionalDatasetSpec& extra, bool embed) {
  ojson j;
  j["id"] = r.id;
  j["done"] = done;
  j["finish_reason"] = std::string(finish_reason_name(r.finish_reason));
  j["error"] = r.error;
  j["prompt_tokens"] = r.prompt_tokens;
  j["output_tokens"] = r.output_tokens;
  j["output_text"] = r.output_text;
  j["reasoning_text"] = r.reasoning_text;
  j["output_logprobs"] = r.output_logprobs;
  j["logprob_sum"] = r.logprob_sum;
  j["is_greedy"] = r.is_greedy != 0;
  if (!r.top_logprob_tokens.empty()) {
    j["top_logprob_tokens"] = r.top_logprob_tokens;
    j["top_logprobs"] = r.top_logprobs;
  }
  if (embed) j["embedding"] = r.embedding;
  if (extra.truncated_tokens) j["truncated_tokens"] = r.truncated_tokens;
  if (extra.samples) j["input_line"] = r.line, j["sample"] = r.sample;
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

// What the OpenAI output lines share: request ids, model name, created, how lines make rows.
OpenAIBatchJob openai_job(const ExportOptions& o, const ResultsReader& f, const std::string& task,
                          const JobSettings& settings) {
  OpenAIBatchJob job;
  job.job_id = f.job_id();
  job.model_name = std::filesystem::path(f.text_attribute("model")).filename().string();
  // A stable "created" for every body: the results file's modification time.
  struct stat st {};
  job.created = ::stat(o.results.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_mtime) : 0;
  job.embed = task == "embed";
  job.samples = f.optional_datasets().samples;
  job.sample_job.task = task == "generate" ? Task::kGenerate : task == "embed" ? Task::kEmbed : Task::kScore;
  job.sample_job.sampling.n = settings.samples_per_line;
  job.id_field = settings.id_field;
  job.reasoning = settings.reasoning;
  return job;
}

}  // namespace

int run_export(const ExportOptions& o, std::ostream& stdout_stream) {
  ResultsReader f = ResultsReader::open_to_read(o.results);
  const std::string task = f.text_attribute("task", "generate");
  const bool openai = o.format == "openai";
  if (openai && task != "generate" && task != "embed")
    throw JobError("--format openai needs the results of a generate or embed job; '" + o.results + "' is task: " + task);

  // The job's input: an openai export reads it; no export may write over it.
  const JobSettings settings = job_settings(f);
  std::string in_path = o.input.empty() ? settings.input_path : o.input;
  if (openai) {
    // Each output line takes its kind, model and (for rows never run) custom_id from its input
    // line: only the input the rows were computed from may label them.
    const FoundInput found = find_input(o, f, in_path, settings.output_path);
    in_path = found.path;
    log_info("export: the job's input is '%s' (%s)", in_path.c_str(), found.how.c_str());
  }
  const bool to_stdout = o.output.empty() || o.output == "-";
  if (!to_stdout) refuse_output_over_inputs(o, in_path);
  std::optional<JsonlReader> input;
  if (openai) input.emplace(in_path);

  std::ofstream file_out;
  if (!to_stdout) {
    file_out.open(o.output, std::ios::binary | std::ios::trunc);
    if (!file_out) throw JobError("cannot write '" + o.output + "'");
  }
  std::ostream& out = to_stdout ? stdout_stream : file_out;
  TokenNames names(places_of(f.text_attribute("model"), settings.output_path, o.results));
  std::optional<OpenAIBatchOutput> batch;
  if (openai) batch.emplace(openai_job(o, f, task, settings), *input, names, out);
  const OptionalDatasetSpec extra = f.optional_datasets();
  constexpr int64_t kChunkRows = 1024;  // rows in memory at a time
  for (int64_t start = 0; start < f.num_rows(); start += kChunkRows) {
    const int64_t count = std::min(kChunkRows, f.num_rows() - start);
    const std::vector<uint8_t> done = f.read_done(start, count);
    const std::vector<RowResult> rows = f.read_rows(start, count);
    for (size_t i = 0; i < rows.size(); ++i) {
      if (batch) batch->add(rows[i], done[i] != 0);
      else write_jsonl_row(out, rows[i], done[i] != 0, extra, task == "embed");
    }
  }
  if (batch) batch->finish();
  out.flush();
  if (!out) throw Error("writing the export failed" + (to_stdout ? std::string() : " ('" + o.output + "')"));
  return kExitOk;
}

}  // namespace tpbatch
