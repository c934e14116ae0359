// The job file: defaults, validation messages, --set overrides, paths, effective YAML.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "temp_dir_test.h"
#include "common/error.h"
#include "job/job_spec.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

class JobSpecTest : public tpbatch::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    fs::create_directories(dir_ / "model");
    std::ofstream(dir_ / "prompts.jsonl") << "{\"prompt\": \"hi\"}\n";
    base_ = "model: " + (dir_ / "model").string() + "\ninput:\n  path: " + (dir_ / "prompts.jsonl").string() + "\n";
  }

  JobSpec parse(const std::string& extra = "", const std::vector<std::string>& ov = {}) {
    return parse_job(base_ + extra, ov, dir_);
  }
  // The error message of a job that must fail with exit 2.
  std::string error_of(const std::string& yaml, const std::vector<std::string>& ov = {}) {
    try {
      parse_job(yaml, ov, dir_);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2) << e.what();
      return e.what();
    }
    ADD_FAILURE() << "no error for:\n" << yaml;
    return "";
  }
  std::string extra_error(const std::string& extra, const std::vector<std::string>& ov = {}) {
    return error_of(base_ + extra, ov);
  }

  std::string base_;
};

}  // namespace

TEST_F(JobSpecTest, DefaultsEqualContract) {
  JobSpec j = parse();
  EXPECT_EQ(j.model, (dir_ / "model").string());
  EXPECT_EQ(j.dtype, DTypeChoice::kAuto);
  EXPECT_EQ(j.device, Device::kAuto);
  EXPECT_EQ(j.engine.kv_cache_dtype, DTypeChoice::kAuto);
  EXPECT_EQ(j.parallel.tensor, 1);
  EXPECT_EQ(j.parallel.pipeline, 1);
  EXPECT_EQ(j.parallel.ranks_per_node, 0);
  EXPECT_EQ(j.input.text_field, "prompt");
  EXPECT_FALSE(j.input.tokens_field.has_value());
  EXPECT_EQ(j.input.id_field, "id");
  EXPECT_EQ(j.input.completion_field, "completion");
  EXPECT_EQ(j.input.on_bad_line, OnBadLine::kRecord);
  EXPECT_EQ(j.task, Task::kGenerate);
  EXPECT_EQ(j.sampling.max_new_tokens, 128);
  EXPECT_EQ(j.sampling.temperature, 0.0);
  EXPECT_EQ(j.sampling.top_k, 0);
  EXPECT_EQ(j.sampling.top_p, 1.0);
  EXPECT_EQ(j.sampling.seed, 0u);
  EXPECT_TRUE(j.sampling.stop.empty());
  EXPECT_FALSE(j.sampling.ignore_eos);
  EXPECT_EQ(j.output.path, "results.h5");
  EXPECT_EQ(j.output.if_exists, IfExists::kResume);
  EXPECT_TRUE(j.output.logprobs);
  EXPECT_EQ(j.engine.max_batch_tokens, 4096);
  EXPECT_EQ(j.engine.max_seqs, 64);
  EXPECT_EQ(j.engine.kv_cache_tokens, 0);
  EXPECT_DOUBLE_EQ(j.engine.memory_utilization, 0.90);
}

TEST_F(JobSpecTest, EngineExtraKeysHaveDefaults) {
  JobSpec j = parse();
  EXPECT_EQ(j.engine.block_size, 16);
  EXPECT_EQ(j.engine.threads, 0);
  EXPECT_EQ(j.engine.progress_interval, 10.0);
  EXPECT_EQ(j.engine.admission, AdmissionPolicy::kFifo);
  EXPECT_EQ(j.engine.lookahead, 64);
  EXPECT_EQ(j.engine.watchdog_seconds, 300.0);
}

TEST_F(JobSpecTest, ContractExampleParses) {
  JobSpec j = parse(R"(dtype: bfloat16
device: cpu
parallel:
  tensor: 2
  pipeline: 1
  ranks_per_node: 0
task: score
sampling:
  max_new_tokens: 64
  temperature: 0.7
  top_k: 40
  top_p: 0.95
  seed: 12345678901234567890
  stop: ["\n\n", "END"]
  ignore_eos: true
output:
  path: out/results.h5
  if_exists: overwrite
  logprobs: false
engine:
  max_batch_tokens: 8192
  max_seqs: 128
  kv_cache_tokens: 100000
  memory_utilization: 0.5
  watchdog_seconds: 60
)");
  EXPECT_EQ(j.dtype, DTypeChoice::kBFloat16);
  EXPECT_EQ(j.device, Device::kCpu);
  EXPECT_EQ(j.parallel.tensor, 2);
  EXPECT_EQ(j.task, Task::kScore);
  EXPECT_EQ(j.sampling.temperature, 0.7);
  EXPECT_EQ(j.sampling.top_k, 40);
  EXPECT_EQ(j.sampling.seed, 12345678901234567890ull);
  EXPECT_EQ(j.sampling.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_TRUE(j.sampling.ignore_eos);
  EXPECT_EQ(j.output.path, "out/results.h5");
  EXPECT_EQ(j.output.if_exists, IfExists::kOverwrite);
  EXPECT_FALSE(j.output.logprobs);
  EXPECT_EQ(j.engine.max_batch_tokens, 8192);
  EXPECT_EQ(j.engine.kv_cache_tokens, 100000);
  EXPECT_EQ(j.engine.memory_utilization, 0.5);
  EXPECT_EQ(j.engine.watchdog_seconds, 60.0);
}

TEST_F(JobSpecTest, MissingJobFileNamed) {
  try {
    load_job(dir_ / "x.yaml", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_EQ(std::string(e.what()), "job file '" + (dir_ / "x.yaml").string() + "' not found");
  }
}

TEST_F(JobSpecTest, SyntaxErrorNamesLine) {
  std::string msg = error_of("model: m\ninput:\n  path: p\n  text_field: [a, b\n");
  EXPECT_NE(msg.find("job.yaml line "), std::string::npos) << msg;
  EXPECT_NE(msg.find("YAML syntax error"), std::string::npos) << msg;
}

TEST_F(JobSpecTest, UnknownKeySuggestsClosest) {
  EXPECT_EQ(extra_error("engine:\n  max_seq: 4\n"),
            "job.yaml: unknown key 'engine.max_seq' (did you mean 'engine.max_seqs'?)");
}

TEST_F(JobSpecTest, UnknownTopLevelKeySuggestsSection) {
  EXPECT_EQ(extra_error("samplng:\n  top_k: 4\n"), "job.yaml: unknown key 'samplng' (did you mean 'sampling'?)");
}

TEST_F(JobSpecTest, UnknownKeyWithoutCloseMatchHasNoSuggestion) {
  EXPECT_EQ(extra_error("frobnicate: 1\n"), "job.yaml: unknown key 'frobnicate'");
}

// There is no custom allreduce: a job that asks for one gets the ordinary unknown-key error, not a
// setting that silently does nothing.
TEST_F(JobSpecTest, CustomAllreduceIsAnUnknownKey) {
  EXPECT_EQ(extra_error("engine:\n  custom_allreduce: true\n").rfind("job.yaml: unknown key 'engine.custom_allreduce'", 0),
            0u);
}

TEST_F(JobSpecTest, WrongTypeNamesKeyAndValue) {
  EXPECT_EQ(extra_error("parallel:\n  tensor: two\n"),
            "job.yaml: 'parallel.tensor' must be a positive integer, got \"two\"");
}

TEST_F(JobSpecTest, ModelRequired) {
  EXPECT_EQ(error_of("input:\n  path: " + (dir_ / "prompts.jsonl").string() + "\n"), "job.yaml: 'model' is required");
}

TEST_F(JobSpecTest, InputPathRequired) {
  EXPECT_EQ(error_of("model: " + (dir_ / "model").string() + "\n"), "job.yaml: 'input.path' is required");
}

TEST_F(JobSpecTest, EnumKeysListTheirChoices) {
  EXPECT_EQ(extra_error("  on_bad_line: skip\n"),
            "job.yaml: 'input.on_bad_line' must be one of record, fail, got \"skip\"");
  EXPECT_NE(extra_error("task: chat\n").find("'task' must be one of generate, score"), std::string::npos);
  EXPECT_NE(extra_error("dtype: fp8\n").find("'dtype' must be one of auto, float32, bfloat16, float16"),
            std::string::npos);
  EXPECT_NE(extra_error("device: tpu\n").find("'device' must be one of auto, cpu, cuda"), std::string::npos);
  EXPECT_EQ(extra_error("engine:\n  kv_cache_dtype: float16\n"),
            "job.yaml: 'engine.kv_cache_dtype' must be one of auto, float32, bfloat16, got \"float16\"");
  EXPECT_NE(extra_error("output:\n  if_exists: append\n").find("'output.if_exists' must be one of resume, overwrite, fail"),
            std::string::npos);
}

// dtype, device and engine.kv_cache_dtype are read into enums and written back by name.
TEST_F(JobSpecTest, DtypeAndDeviceChoicesAreEnums) {
  const JobSpec j = parse("", {"dtype=float16", "device=cuda", "engine.kv_cache_dtype=bfloat16"});
  EXPECT_EQ(j.dtype, DTypeChoice::kFloat16);
  EXPECT_EQ(j.device, Device::kCuda);
  EXPECT_EQ(j.engine.kv_cache_dtype, DTypeChoice::kBFloat16);
  EXPECT_NE(j.effective_yaml.find("dtype: float16\ndevice: cuda\n"), std::string::npos) << j.effective_yaml;
  EXPECT_NE(j.effective_yaml.find("  kv_cache_dtype: bfloat16\n"), std::string::npos) << j.effective_yaml;
}

TEST_F(JobSpecTest, EveryRangeValidationNamesItsKey) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"parallel:\n  tensor: 0\n", "'parallel.tensor' must be a positive integer, got 0"},
      {"parallel:\n  pipeline: -1\n", "'parallel.pipeline' must be a positive integer, got -1"},
      {"parallel:\n  ranks_per_node: -2\n", "'parallel.ranks_per_node' must be a non-negative integer, got -2"},
      {"sampling:\n  temperature: -0.1\n", "'sampling.temperature' must be a number >= 0, got -0.1"},
      {"sampling:\n  top_p: 0\n", "'sampling.top_p' must be a number in (0, 1], got 0"},
      {"sampling:\n  top_p: 1.5\n", "'sampling.top_p' must be a number in (0, 1], got 1.5"},
      {"sampling:\n  top_k: -1\n", "'sampling.top_k' must be a non-negative integer, got -1"},
      {"sampling:\n  max_new_tokens: -5\n", "'sampling.max_new_tokens' must be a non-negative integer, got -5"},
      {"sampling:\n  seed: -1\n", "'sampling.seed' must be a non-negative integer, got -1"},
      {"sampling:\n  ignore_eos: maybe\n", "'sampling.ignore_eos' must be true or false, got \"maybe\""},
      {"sampling:\n  stop: [\"a\", \"\"]\n", "'sampling.stop' must be a list of non-empty strings"},
      {"engine:\n  max_seqs: 0\n", "'engine.max_seqs' must be a positive integer, got 0"},
      {"engine:\n  max_batch_tokens: 0\n", "'engine.max_batch_tokens' must be a positive integer, got 0"},
      {"engine:\n  memory_utilization: 0\n", "'engine.memory_utilization' must be a number in (0, 1], got 0"},
      {"engine:\n  memory_utilization: 1.2\n", "'engine.memory_utilization' must be a number in (0, 1], got 1.2"},
      {"engine:\n  kv_cache_tokens: -1\n", "'engine.kv_cache_tokens' must be a non-negative integer, got -1"},
      {"engine:\n  block_size: 0\n", "'engine.block_size' must be a positive integer, got 0"},
      {"engine:\n  watchdog_seconds: -1\n", "'engine.watchdog_seconds' must be a number >= 0, got -1"},
      {"engine:\n  max_seqs: 2.5\n", "'engine.max_seqs' must be a positive integer, got 2.5"},
      {"output:\n  logprobs: [1]\n", "'output.logprobs' must be true or false, got a list"},
  };
  for (const auto& [yaml, expected] : cases) {
    std::string msg = error_of(yaml + base_);
    EXPECT_NE(msg.find(expected), std::string::npos) << "yaml: " << yaml << "message: " << msg;
  }
}

TEST_F(JobSpecTest, BoundaryValuesAccepted) {
  JobSpec j = parse(
      "sampling:\n  top_p: 1\n  temperature: 0\n  max_new_tokens: 0\n  top_k: 0\nengine:\n  max_seqs: 1\n"
      "  max_batch_tokens: 1\n  memory_utilization: 1.0\n");
  EXPECT_EQ(j.sampling.top_p, 1.0);
  EXPECT_EQ(j.sampling.max_new_tokens, 0);
  EXPECT_EQ(j.engine.max_batch_tokens, 1);
}

TEST_F(JobSpecTest, StopAcceptsSingleString) {
  EXPECT_EQ(parse("sampling:\n  stop: END\n").sampling.stop, std::vector<std::string>{"END"});
}

TEST_F(JobSpecTest, TokensFieldNullAllowed) {
  EXPECT_FALSE(parse("  tokens_field: null\n").input.tokens_field.has_value());
  EXPECT_EQ(parse("  tokens_field: ids\n").input.tokens_field.value(), "ids");
}

TEST_F(JobSpecTest, DuplicateKeyRejected) {
  EXPECT_EQ(extra_error("engine:\n  max_seqs: 4\n  max_seqs: 8\n"), "job.yaml: duplicate key 'engine.max_seqs'");
}

TEST_F(JobSpecTest, SectionMustBeMapping) {
  EXPECT_NE(extra_error("parallel: 2\n").find("'parallel' must be a mapping"), std::string::npos);
}

TEST_F(JobSpecTest, SetOverridesNestedKey) {
  JobSpec j = parse("parallel:\n  tensor: 2\n", {"parallel.tensor=4", "engine.max_seqs=8", "dtype=float32"});
  EXPECT_EQ(j.parallel.tensor, 4);
  EXPECT_EQ(j.engine.max_seqs, 8);
  EXPECT_EQ(j.dtype, DTypeChoice::kFloat32);
}

TEST_F(JobSpecTest, SetCreatesMissingSection) {
  EXPECT_EQ(parse("", {"sampling.temperature=0.5"}).sampling.temperature, 0.5);
}

TEST_F(JobSpecTest, SetAcceptsFlowList) {
  EXPECT_EQ(parse("", {"sampling.stop=[\".\",\"!\"]"}).sampling.stop, (std::vector<std::string>{".", "!"}));
}

TEST_F(JobSpecTest, SetTokensFieldToNull) {
  EXPECT_FALSE(parse("  tokens_field: ids\n", {"input.tokens_field=null"}).input.tokens_field.has_value());
}

TEST_F(JobSpecTest, SetUnknownKeyNamed) {
  EXPECT_EQ(extra_error("", {"engine.max_seq=4"}),
            "--set engine.max_seq=4: unknown key 'engine.max_seq' (did you mean 'engine.max_seqs'?)");
}

TEST_F(JobSpecTest, SetWithoutEqualsRejected) {
  EXPECT_NE(extra_error("", {"parallel.tensor"}).find("expected KEY=VALUE"), std::string::npos);
}

TEST_F(JobSpecTest, SetBadValueBlamesTheSet) {
  EXPECT_EQ(extra_error("", {"parallel.tensor=two"}),
            "--set parallel.tensor=two: 'parallel.tensor' must be a positive integer, got \"two\"");
}

TEST_F(JobSpecTest, ModelFolderNotFound) {
  std::string msg = error_of("model: no_such_model_xyz\ninput:\n  path: " + (dir_ / "prompts.jsonl").string() + "\n");
  EXPECT_NE(msg.find("model folder 'no_such_model_xyz' not found"), std::string::npos) << msg;
}

TEST_F(JobSpecTest, InputFileNotFound) {
  std::string msg = error_of("model: " + (dir_ / "model").string() + "\ninput:\n  path: nope_xyz.jsonl\n");
  EXPECT_NE(msg.find("input file 'nope_xyz.jsonl' not found"), std::string::npos) << msg;
}

TEST_F(JobSpecTest, RelativePathsFromJobFolder) {
  std::ofstream(dir_ / "job.yaml") << "model: model\ninput:\n  path: prompts.jsonl\n";
  JobSpec j = load_job(dir_ / "job.yaml", {});
  EXPECT_EQ(fs::path(j.model), dir_ / "model");
  EXPECT_EQ(fs::path(j.input.path), dir_ / "prompts.jsonl");
}

TEST_F(JobSpecTest, RelativePathsPreferWorkingDirectory) {
  fs::create_directories(dir_ / "cwd" / "model");
  std::ofstream(dir_ / "cwd" / "prompts.jsonl") << "{}\n";
  std::ofstream(dir_ / "job.yaml") << "model: model\ninput:\n  path: prompts.jsonl\n";
  fs::path old = fs::current_path();
  fs::current_path(dir_ / "cwd");
  JobSpec j = load_job(dir_ / "job.yaml", {});
  fs::current_path(old);
  EXPECT_EQ(j.model, "model");
  EXPECT_EQ(j.input.path, "prompts.jsonl");
}

TEST_F(JobSpecTest, LoadJobErrorsNameTheFile) {
  std::ofstream(dir_ / "my.yaml") << base_ << "engine:\n  max_seq: 1\n";
  try {
    load_job(dir_ / "my.yaml", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind((dir_ / "my.yaml").string() + ": unknown key 'engine.max_seq'", 0), 0u)
        << e.what();
  }
}

TEST_F(JobSpecTest, EffectiveYamlRoundTrips) {
  JobSpec a = parse("sampling:\n  stop: [\"\\n\", \" x\", \"true\"]\n  temperature: 0.7\n",
                    {"parallel.tensor=2", "input.tokens_field=ids"});
  JobSpec b = parse_job(a.effective_yaml, {}, dir_);
  EXPECT_EQ(a.effective_yaml, b.effective_yaml);
  EXPECT_EQ(b.sampling.stop, (std::vector<std::string>{"\n", " x", "true"}));
  EXPECT_EQ(b.sampling.temperature, 0.7);
  EXPECT_EQ(b.parallel.tensor, 2);
  EXPECT_EQ(b.input.tokens_field.value(), "ids");
}

TEST_F(JobSpecTest, EffectiveYamlHasEveryKeyWithDefaults) {
  YAML::Node n = YAML::Load(parse().effective_yaml);
  for (const char* k : {"model", "dtype", "device", "task"}) EXPECT_TRUE(n[k]) << k;
  EXPECT_EQ(n["engine"]["memory_utilization"].as<std::string>(), "0.9");
  EXPECT_EQ(n["engine"]["watchdog_seconds"].as<double>(), 300.0);
  EXPECT_TRUE(n["input"]["tokens_field"].IsNull());
  EXPECT_EQ(n["sampling"]["max_new_tokens"].as<int>(), 128);
  EXPECT_EQ(n["output"]["if_exists"].as<std::string>(), "resume");
  EXPECT_EQ(n["parallel"]["ranks_per_node"].as<int>(), 0);
}

// The effective YAML is compared by resumes and hashed by every rank: its text for a job is fixed.
TEST_F(JobSpecTest, EffectiveYamlTextIsStable) {
  const std::string expected = "model: " + (dir_ / "model").string() + "\ndtype: auto\ndevice: auto\n"
      "parallel:\n  tensor: 1\n  pipeline: 1\n  ranks_per_node: 0\n"
      "input:\n  path: " + (dir_ / "prompts.jsonl").string() + "\n  text_field: prompt\n  tokens_field: ~\n"
      "  id_field: id\n  completion_field: completion\n  on_bad_line: record\n  unknown_keys: error\n"
      "  score_tokenization: joint\n"
      "task: generate\n"
      "sampling:\n  max_new_tokens: 128\n  temperature: 0.0\n  top_k: 0\n  top_p: 1.0\n  seed: 0\n  stop: []\n"
      "  ignore_eos: false\n  min_p: 0.0\n  repetition_penalty: 1.0\n  presence_penalty: 0.0\n"
      "  frequency_penalty: 0.0\n  stop_token_ids: []\n  min_tokens: 0\n  top_logprobs: 0\n"
      "output:\n  path: results.h5\n  if_exists: resume\n  logprobs: true\n"
      "engine:\n  max_batch_tokens: 4096\n  max_seqs: 64\n  kv_cache_tokens: 0\n  kv_cache_dtype: auto\n"
      "  memory_utilization: 0.9\n  block_size: 16\n  threads: 0\n  progress_interval: 10.0\n  admission: fifo\n"
      "  lookahead: 64\n  prefix_caching: true\n  watchdog_seconds: 300.0\n";
  EXPECT_EQ(parse().effective_yaml, expected);
}

// Keys emitted only for some jobs: input.truncate when not "error", embed: for embed jobs,
// chat_template when a file is named; each in its place.
TEST_F(JobSpecTest, EffectiveYamlConditionalKeysInPlace) {
  std::ofstream(dir_ / "t.jinja") << "{{ x }}";
  const std::string plain = parse("embed:\n  pooling: mean\n").effective_yaml;
  EXPECT_EQ(plain.find("embed:"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("truncate"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("chat_template"), std::string::npos) << plain;
  const std::string y = parse("task: embed\nembed:\n  pooling: mean\n", {"input.truncate=left", "chat_template=t.jinja"})
                            .effective_yaml;
  EXPECT_NE(y.find("  score_tokenization: joint\n  truncate: left\ntask: embed\nembed:\n  pooling: mean\n"
                   "  normalize: true\nchat_template: " + (dir_ / "t.jinja").string() + "\nsampling:\n"),
            std::string::npos)
      << y;
}

TEST_F(JobSpecTest, BinaryJobFileRejected) {
  std::ofstream(dir_ / "r.h5", std::ios::binary) << std::string("\x89HDF\r\n\x1a\n\0\0", 10);
  try {
    load_job(dir_ / "r.h5", {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("is not a YAML text file (to summarize a results file: tpbatch inspect"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(JobSpecTest, AShardNamesItsResultsFileButNotItsJobYaml) {
  const JobSpec whole = parse("output:\n  path: out/results.h5\n");
  const JobSpec shard = parse("output:\n  path: out/results.h5\n", {"input.shard=3/16"});
  EXPECT_EQ(shard.shard.index, 3);
  EXPECT_EQ(shard.shard.count, 16);
  EXPECT_EQ(shard.output.path, "out/results.shard-0003-of-0016.h5");
  EXPECT_EQ(whole.output.path, "out/results.h5");
  EXPECT_FALSE(whole.shard.sharded());
  // Every shard of a job has the whole job's YAML: resume and merge compare it.
  EXPECT_EQ(shard.effective_yaml, whole.effective_yaml);
}

TEST_F(JobSpecTest, ABadShardNamesInputShard) {
  EXPECT_NE(error_of(base_ + "  shard: 16/16\n").find("job.yaml: input.shard '16/16': shard index 16 is not below"),
            std::string::npos);
  EXPECT_NE(error_of(base_, {"input.shard=3"}).find("--set input.shard=3: input.shard '3' is not a shard"),
            std::string::npos);
}
