// `tpbatch plan` as a command: job + config.json only (no weights, no MPI), JSON and text output,
// --set overrides, exit codes.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "plan/plan_command.h"
#include "test_plan_util.h"

namespace tpbatch {
namespace {

using namespace plan_test;
using nlohmann::json;

// A job folder: model/config.json (70B) + prompts.jsonl + job.yaml.
struct JobDir {
  std::filesystem::path dir;
  explicit JobDir(const std::string& config_json, const std::string& extra_yaml = "") {
    dir = make_temp_dir("job");
    std::filesystem::create_directories(dir / "model");
    write_file(dir / "model" / "config.json", config_json);
    write_file(dir / "prompts.jsonl", "{\"prompt\": \"hello\"}\n");
    write_file(dir / "job.yaml", "model: " + (dir / "model").string() + "\ninput:\n  path: " +
                                     (dir / "prompts.jsonl").string() + "\n" + extra_yaml);
  }
  ~JobDir() { std::filesystem::remove_all(dir); }
  std::string job() const { return (dir / "job.yaml").string(); }
};

json run_json(PlanOptions o) {
  o.json = true;
  std::ostringstream out;
  EXPECT_EQ(run_plan(o, out), 0);
  return json::parse(out.str());
}

const json* find(const json& j, int tensor, int pipeline) {
  for (const auto& l : j["layouts"])
    if (l["tensor"] == tensor && l["pipeline"] == pipeline) return &l;
  return nullptr;
}

TEST(PlanCommand, JsonHasTheContractFieldsForEveryLayout) {
  JobDir d(llama31_70b());
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 16;
  o.device_memory_gib = 74.5;
  const json j = run_json(o);
  EXPECT_EQ(j["world_size"], 16);
  EXPECT_EQ(j["device_memory_bytes"], int64_t{79993765888});
  EXPECT_TRUE(j.contains("model"));
  ASSERT_TRUE(j["layouts"].is_array());
  ASSERT_FALSE(j["layouts"].empty());
  for (const auto& l : j["layouts"])
    for (const char* key : {"tensor", "pipeline", "data", "weights_bytes_per_rank", "kv_bytes_per_token_per_rank",
                            "kv_tokens_per_rank", "fits"})
      EXPECT_TRUE(l.contains(key)) << key;
  ASSERT_TRUE(j["recommended"].contains("throughput"));
  ASSERT_TRUE(j["recommended"].contains("latency"));
}

TEST(PlanCommand, Llama70BAcceptanceNumbersAtWorld16) {
  JobDir d(llama31_70b());
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 16;
  o.device_memory_gib = 74.5;
  const json j = run_json(o);
  EXPECT_EQ((*find(j, 4, 1))["kv_bytes_per_token_per_rank"], 80 * 1024);
  EXPECT_EQ((*find(j, 8, 1))["kv_bytes_per_token_per_rank"], 40 * 1024);
  EXPECT_EQ((*find(j, 16, 1))["kv_bytes_per_token_per_rank"], 40 * 1024);
  EXPECT_FALSE((*find(j, 1, 1))["fits"].get<bool>());
  EXPECT_FALSE((*find(j, 2, 1))["fits"].get<bool>());
  EXPECT_TRUE((*find(j, 4, 1))["fits"].get<bool>());
  EXPECT_TRUE((*find(j, 8, 1))["fits"].get<bool>());
  EXPECT_EQ(j["recommended"]["throughput"]["tensor"], 4);
  EXPECT_EQ(j["recommended"]["throughput"]["data"], 4);
}

TEST(PlanCommand, SetOverridesTheJobDtype) {
  JobDir d(llama31_70b());
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 8;
  o.device_memory_gib = 74.5;
  const json bf16 = run_json(o);
  o.sets = {"dtype=float32"};
  const json fp32 = run_json(o);
  EXPECT_EQ(fp32["bytes_per_element"], 4);
  EXPECT_EQ(fp32["weight_dtype"], "float32");
  EXPECT_EQ(bf16["weight_dtype"], "bfloat16");
  // Twice the bytes, except the 1318912 norm weights and the 64-float RoPE table, float32 in both.
  EXPECT_EQ(2 * (*find(bf16, 8, 1))["weights_bytes_per_rank"].get<int64_t>() -
                (*find(fp32, 8, 1))["weights_bytes_per_rank"].get<int64_t>(),
            (1318912 + 64) * 4);
  // --device-memory without device: plans for CUDA, whose KV cache is bfloat16 whatever the weights.
  EXPECT_EQ(fp32["device"], "cuda");
  EXPECT_EQ(fp32["kv_cache_dtype"], "bfloat16");
  EXPECT_EQ((*find(fp32, 8, 1))["kv_bytes_per_token_per_rank"], (*find(bf16, 8, 1))["kv_bytes_per_token_per_rank"]);
}

TEST(PlanCommand, RowTokensDefaultToPromptBudgetPlusMaxNewTokens) {
  JobDir d(llama31_8b(), "sampling:\n  max_new_tokens: 256\n");
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 1;
  o.device_memory_gib = 74.5;
  EXPECT_EQ(run_json(o)["row_tokens"], 1024 + 256);
  o.row_tokens = 8192;
  EXPECT_EQ(run_json(o)["row_tokens"], 8192);
}

TEST(PlanCommand, WorldSizeDefaultsToTheJobsTensorTimesPipeline) {
  JobDir d(llama31_8b(), "parallel:\n  tensor: 2\n  pipeline: 2\n");
  PlanOptions o;
  o.job_path = d.job();
  o.device_memory_gib = 40;
  EXPECT_EQ(run_json(o)["world_size"], 4);
}

TEST(PlanCommand, CpuDefaultsUseAvailableMemoryAndCpuAlphaBeta) {
  JobDir d(llama31_8b());
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 2;
  const json j = run_json(o);
  EXPECT_GT(j["device_memory_bytes"].get<int64_t>(), 0);
  EXPECT_FALSE(j["accelerator"].get<bool>());
  EXPECT_DOUBLE_EQ(j["alpha_us"].get<double>(), kCpuAlphaUs);
  EXPECT_DOUBLE_EQ(j["bandwidth_gbs"].get<double>(), kCpuBusBandwidthGBs);
}

TEST(PlanCommand, TextOutputSaysCpuBackendComputesInFloat32) {
  JobDir d(llama31_70b());
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 8;
  o.device_memory_gib = 74.5;
  std::ostringstream out;
  EXPECT_EQ(run_plan(o, out), 0);
  const std::string text = out.str();
  EXPECT_NE(text.find("float32"), std::string::npos);
  EXPECT_NE(text.find("recommended for throughput: tensor 4 x pipeline 1 x data 2"), std::string::npos) << text;
  EXPECT_NE(text.find("recommended for latency:    tensor 8 x pipeline 1 x data 1"), std::string::npos) << text;
}

TEST(PlanCommand, MissingConfigJsonIsAConfigErrorExit1) {
  JobDir d(llama31_8b());
  std::filesystem::remove(d.dir / "model" / "config.json");
  PlanOptions o;
  o.job_path = d.job();
  o.device_memory_gib = 10;
  std::ostringstream out;
  try {
    run_plan(o, out);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitFailure);
  }
}

TEST(PlanCommand, BadJobOrOptionIsExit2) {
  JobDir d(llama31_8b());
  PlanOptions o;
  o.job_path = (d.dir / "missing.yaml").string();
  std::ostringstream out;
  try {
    run_plan(o, out);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
  }
  o.job_path = d.job();
  o.world_size = -1;
  try {
    run_plan(o, out);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
  }
}

TEST(PlanCommand, BinaryRunsWithoutMpiAndExits2OnBadArguments) {
  JobDir d(llama31_70b());
  const std::string bin = TPBATCH_BINARY;
  const std::string json_path = (d.dir / "plan.json").string();
  const std::string cmd = bin + " plan " + d.job() + " --json --world-size 8 --device-memory 74.5 >" + json_path;
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(json_path);
  const json j = json::parse(in);
  EXPECT_EQ(j["world_size"], 8);
  const int rc = std::system((bin + " plan " + d.job() + " --world-size 0 2>/dev/null").c_str());
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 2);
}

// The contract: plan needs config.json only. The job's input file may not exist yet.
TEST(PlanCommand, RunsWithoutTheInputFile) {
  JobDir d(llama31_8b());
  std::filesystem::remove(d.dir / "prompts.jsonl");
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 8;
  const json j = run_json(o);
  EXPECT_FALSE(j["layouts"].empty()) << j.dump();
}

}  // namespace
}  // namespace tpbatch
