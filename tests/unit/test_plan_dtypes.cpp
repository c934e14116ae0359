// `tpbatch plan`'s dtypes, as the run has them: the device (--device, the job's
// device:, cuda when --device-memory is given) decides the KV cache dtype of kv_cache_dtype auto
// (float32 on the CPU, bfloat16 on CUDA) and the activation dtype; dtype auto is the checkpoint's
// storage dtype when the weights are there (as run_job reads it), else config.json's torch_dtype.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "plan/plan_command.h"
#include "test_plan_util.h"
#include "tools/make_model.h"

namespace tpbatch {
namespace {

using namespace plan_test;
using nlohmann::json;

struct Job {
  std::filesystem::path dir;
  Job(const std::string& yaml_extra, const std::filesystem::path& model = {}) {
    dir = make_temp_dir("dtypes");
    std::filesystem::path m = model;
    if (m.empty()) {
      m = dir / "model";
      std::filesystem::create_directories(m);
      write_file(m / "config.json", llama31_8b());
    }
    write_file(dir / "prompts.jsonl", "{\"prompt\": \"hello\"}\n");
    write_file(dir / "job.yaml", "model: " + m.string() + "\ninput:\n  path: " + (dir / "prompts.jsonl").string() +
                                     "\n" + yaml_extra);
  }
  ~Job() { std::filesystem::remove_all(dir); }
  PlanOptions options() const {
    PlanOptions o;
    o.job_path = (dir / "job.yaml").string();
    o.world_size = 1;
    o.json = true;
    return o;
  }
};

json plan(const PlanOptions& o) {
  std::ostringstream out;
  EXPECT_EQ(run_plan(o, out), 0);
  return json::parse(out.str());
}

int64_t kv_per_token(const json& j) { return j["layouts"][0]["kv_bytes_per_token_per_rank"].get<int64_t>(); }

TEST(PlanDtypes, DeviceAutoIsCpuWithoutDeviceMemoryAndCudaWithIt) {
  Job job("");
  PlanOptions o = job.options();
  const json cpu = plan(o);
  EXPECT_EQ(cpu["device"], "cpu");
  EXPECT_EQ(cpu["kv_cache_dtype"], "float32");
  EXPECT_EQ(cpu["activation_dtype"], "float32");
  EXPECT_FALSE(cpu["accelerator"].get<bool>());
  o.device_memory_gib = 80;
  const json cuda = plan(o);
  EXPECT_EQ(cuda["device"], "cuda");
  EXPECT_EQ(cuda["kv_cache_dtype"], "bfloat16");
  EXPECT_EQ(cuda["activation_dtype"], "bfloat16");
  EXPECT_TRUE(cuda["accelerator"].get<bool>());
  // Llama-3.1-8B: 2 x 8 KV heads x 128 x 32 layers x 4 (CPU float32 cache) or 2 bytes.
  EXPECT_EQ(kv_per_token(cpu), 256 * 1024);
  EXPECT_EQ(kv_per_token(cuda), 128 * 1024);
  // The weights are the same dtype (the checkpoint's) on both.
  EXPECT_EQ(cpu["layouts"][0]["weights_bytes_per_rank"], cuda["layouts"][0]["weights_bytes_per_rank"]);
}

TEST(PlanDtypes, DeviceFlagAndJobDeviceDecide) {
  Job cpu_job("device: cpu\n");
  PlanOptions o = cpu_job.options();
  o.device_memory_gib = 64;  // a CPU rank's memory, given: still the CPU
  const json j = plan(o);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["kv_cache_dtype"], "float32");
  EXPECT_EQ(j["device_memory_bytes"], int64_t{64} << 30);
  o.device = "cuda";  // the flag overrides the job
  EXPECT_EQ(plan(o)["device"], "cuda");

  Job auto_job("");
  PlanOptions a = auto_job.options();
  a.device = "cpu";
  a.device_memory_gib = 80;
  EXPECT_EQ(plan(a)["kv_cache_dtype"], "float32");
  a.device = "tpu";
  std::ostringstream out;
  try {
    run_plan(a, out);
    FAIL() << "expected an error for --device tpu";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
  }
}

TEST(PlanDtypes, CudaWithoutDeviceMemoryIsABadJob) {
  Job job("device: cuda\n");
  std::ostringstream out;
  try {
    run_plan(job.options(), out);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
    EXPECT_NE(std::string(e.what()).find("--device-memory"), std::string::npos) << e.what();
  }
}

TEST(PlanDtypes, KvCacheDtypeKeyOverridesTheDeviceDefault) {
  Job job("engine:\n  kv_cache_dtype: bfloat16\n");
  const json j = plan(job.options());  // CPU
  EXPECT_EQ(j["kv_cache_dtype"], "bfloat16");
  EXPECT_EQ(kv_per_token(j), 128 * 1024);
  Job f32("engine:\n  kv_cache_dtype: float32\n");
  PlanOptions o = f32.options();
  o.device_memory_gib = 80;  // CUDA
  EXPECT_EQ(plan(o)["kv_cache_dtype"], "float32");
  EXPECT_EQ(kv_per_token(plan(o)), 256 * 1024);
}

// A generated model stored in bfloat16 whose config.json says torch_dtype float32.
void make_bf16_model_whose_config_says_float32(const std::filesystem::path& model) {
  MakeModelOptions mo;
  mo.dtype = "bfloat16";
  make_model(model, mo);
  json cfg;
  {
    std::ifstream in(model / "config.json");
    in >> cfg;
  }
  cfg["torch_dtype"] = "float32";
  write_file(model / "config.json", cfg.dump(2));
}

// A checkpoint whose config.json says float32 but whose tensors are bf16: the run keeps them bf16
// (the storage dtype), so plan must too.
TEST(PlanDtypes, DtypeAutoIsTheCheckpointsStorageDtype) {
  const std::filesystem::path model = make_temp_dir("dtypes-model") / "m";
  make_bf16_model_whose_config_says_float32(model);
  Job job("", model);
  const json j = plan(job.options());
  EXPECT_EQ(j["weight_dtype"], "bfloat16");
  EXPECT_EQ(j["dtype"], "bfloat16");
  EXPECT_EQ(j["bytes_per_element"], 2);
  Job widened("dtype: float32\n", model);
  EXPECT_EQ(plan(widened.options())["weight_dtype"], "float32");
  std::filesystem::remove_all(model.parent_path());
}

TEST(PlanDtypes, WithoutWeightsDtypeAutoIsTorchDtype) {
  Job job("");  // config.json only: torch_dtype bfloat16
  EXPECT_EQ(plan(job.options())["weight_dtype"], "bfloat16");
}

// config.json and model.safetensors.index.json without the shards (what one downloads to plan
// before fetching the weights): planned from the config; a shard that is there is read.
TEST(PlanDtypes, AnIndexWithoutItsShardsIsPlannedFromTheConfig) {
  const std::filesystem::path model = make_temp_dir("dtypes-index") / "m";
  make_bf16_model_whose_config_says_float32(model);
  std::filesystem::rename(model / "model.safetensors", model / "model-00001-of-00001.safetensors");
  write_file(model / "model.safetensors.index.json",
             R"({"metadata": {"total_size": 1},
                 "weight_map": {"model.embed_tokens.weight": "model-00001-of-00001.safetensors"}})");
  Job job("", model);
  EXPECT_EQ(plan(job.options())["weight_dtype"], "bfloat16");  // the shard is there: its dtype
  std::filesystem::remove(model / "model-00001-of-00001.safetensors");
  EXPECT_EQ(plan(job.options())["weight_dtype"], "float32");  // no shard: torch_dtype
  std::filesystem::remove_all(model.parent_path());
}

}  // namespace
}  // namespace tpbatch
