#pragma once
// The job file (YAML), validated, with `--set key=value` overrides applied. See docs/job.md.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "job/sampling_params.h"
#include "job/shard.h"

namespace tpbatch {

// The choices that the engine branches on, as enums; the job file spells them as in the comments
// (the names live in the key table, src/job/job_keys.cpp).
enum class OnBadLine { kRecord, kFail };                  // record | fail
enum class UnknownKeys { kError, kIgnore };               // error (an error row naming the key) | ignore
enum class ScoreTokenization { kJoint, kSeparate };       // joint | separate
enum class AdmissionPolicy { kFifo, kLongestFirst };      // fifo | longest_first
enum class ExpertSplit { kTensor, kExpert };              // tensor | expert (parallel.experts)
enum class Truncate { kError, kLeft };                    // error | left
enum class Task { kGenerate, kScore, kEmbed };            // generate | score | embed
enum class IfExists { kResume, kOverwrite, kFail };       // resume | overwrite | fail (output.if_exists)
// embed.pooling: which final hidden states make the embedding (engine/embedding_pooling.h).
enum class Pooling { Last, Mean, Cls };                   // last | mean | cls
enum class Device { kAuto, kCpu, kCuda };                 // auto | cpu | cuda
// dtype: auto (the checkpoint's) | float32 | bfloat16 | float16; engine.kv_cache_dtype: auto (the
// backend's: float32 on CPU, bfloat16 on CUDA) | float32 | bfloat16.
enum class DTypeChoice { kAuto, kFloat32, kBFloat16, kFloat16 };
// reasoning: how generated text is split into the reasoning (its <think> block) and the answer,
// named as vLLM names its reasoning parsers; auto picks one from the chat template
// (engine/reasoning_parser.h).
enum class Reasoning { kNone, kAuto, kDeepSeekR1, kQwen3 };  // none | auto | deepseek_r1 | qwen3

// The task as the job file, the results file's `task` attribute and messages spell it. Inline: the
// row parser uses it where the job file's reader (yaml-cpp) is not linked (the fuzz targets).
inline const char* task_name(Task task) {
  switch (task) {
    case Task::kGenerate: return "generate";
    case Task::kScore: return "score";
    case Task::kEmbed: return "embed";
  }
  return "?";
}

struct ParallelSpec {
  int64_t tensor = 1;
  int64_t pipeline = 1;
  int64_t ranks_per_node = 0;          // 0 = as MPI reports
  // Mixture-of-experts layers: tensor splits every expert across the TP ranks like the dense MLP;
  // expert gives each TP rank whole experts (num_experts / tensor of them). One allreduce either way.
  ExpertSplit experts = ExpertSplit::kTensor;
};

struct InputSpec {
  std::string path;                    // required
  std::string text_field = "prompt";
  std::optional<std::string> tokens_field;
  std::string id_field = "id";
  std::string completion_field = "completion";
  OnBadLine on_bad_line = OnBadLine::kRecord;
  UnknownKeys unknown_keys = UnknownKeys::kError;
  ScoreTokenization score_tokenization = ScoreTokenization::kJoint;  // joint: lm-eval's, encode prompt + completion
  Truncate truncate = Truncate::kError;  // prompts longer than the context: error (an error row) | left (keep the last tokens)
  std::string shard;                   // as written: "" (the whole input) | "INDEX/COUNT" | "slurm" (job/shard.h)
};

// task: embed: the final-normed hidden states of the prompt, pooled.
struct EmbedSpec {
  Pooling pooling = Pooling::Last;
  bool normalize = true;               // L2-normalise the pooled vector
};

struct OutputSpec {
  std::string path = "results.h5";
  IfExists if_exists = IfExists::kResume;
  bool logprobs = true;
  int64_t flush_rows = 64;             // rows recorded between two durable flushes (also at least every second)
};

struct EngineSpec {
  int64_t max_batch_tokens = 4096;
  int64_t max_seqs = 64;
  int64_t kv_cache_tokens = 0;         // 0 = from free memory
  DTypeChoice kv_cache_dtype = DTypeChoice::kAuto;  // auto (the backend's: float32 on CPU, bfloat16 on CUDA) | float32 | bfloat16
  double memory_utilization = 0.90;
  int64_t block_size = 16;             // KV cache block, in tokens
  int64_t threads = 0;                 // BLAS threads per rank; 0 = cores / ranks on the node
  double progress_interval = 10.0;     // seconds between progress lines when not on a terminal
  AdmissionPolicy admission = AdmissionPolicy::kFifo;  // admission order within the look-ahead window
  int64_t lookahead = 64;              // rows a replica reads ahead of what it runs
  bool prefix_caching = true;          // share cached KV blocks of equal prompt prefixes within a replica
  double watchdog_seconds = 300.0;     // a rank silent this long ends the job; 0 = off
};

struct JobSpec {
  std::string model;                   // resolved model folder
  DTypeChoice dtype = DTypeChoice::kAuto;  // auto | float32 | bfloat16 | float16
  Device device = Device::kAuto;       // auto | cpu | cuda
  ParallelSpec parallel;
  InputSpec input;
  Task task = Task::kGenerate;
  EmbedSpec embed;                     // task: embed only
  std::string chat_template;           // a file holding a Jinja chat template; empty = tokenizer_config.json's
  std::string chat_template_kwargs;    // the template's further variables, a JSON object's text; empty = none
  Reasoning reasoning = Reasoning::kNone;  // split /reasoning_text from /output_text (generate)
  SamplingParams sampling;
  OutputSpec output;
  EngineSpec engine;
  Shard shard;                         // input.shard resolved; output.path is then the shard's file
  std::string effective_yaml;          // the job as run (overrides applied), for the results file
};

// Reads, overrides and validates a job. Throws tpbatch::Error with exit 2 naming the key (dotted
// path) and the reason: missing file, YAML syntax (with line), unknown key, wrong type, bad value,
// missing required key, unparsable --set. Relative `model` and `input.path` are taken from the
// working directory, else from the job file's folder; `output.path` from the working directory. For
// a sharded job (input.shard) output.path is the shard's results file (shard_output_path); the
// effective YAML keeps output.path as written and leaves input.shard out, so every shard of a job
// has the same job_yaml.
JobSpec load_job(const std::filesystem::path& job_yaml, const std::vector<std::string>& set_overrides);
JobSpec parse_job(const std::string& yaml_text, const std::vector<std::string>& set_overrides,
                  const std::filesystem::path& job_dir);
// As above; `source_name` (the job file as the user named it) prefixes error messages
// (the 3-argument form uses "job.yaml").
JobSpec parse_job(const std::string& yaml_text, const std::vector<std::string>& set_overrides,
                  const std::filesystem::path& job_dir, const std::string& source_name);

}  // namespace tpbatch
