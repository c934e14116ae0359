// `tpbatch plan --preset NAME`: the table's figures (plan/hardware_presets.h) reach the cost model
// as datasheet x the stated fractions; a flag given overrides its figure; an unknown name is a bad
// command line (exit 2) naming it and the valid ones; `cpu` measures this machine.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "common/error.h"
#include "plan/cost_model.h"
#include "plan/hardware_presets.h"
#include "plan/plan_command.h"
#include "test_plan_util.h"

namespace tpbatch {
namespace {

using namespace plan_test;
using nlohmann::json;

struct PresetJob {
  std::filesystem::path dir;
  explicit PresetJob(const std::string& config_json = llama31_70b()) {
    dir = make_temp_dir("preset");
    std::filesystem::create_directories(dir / "model");
    write_file(dir / "model" / "config.json", config_json);
    write_file(dir / "job.yaml", "model: " + (dir / "model").string() + "\ninput:\n  path: " +
                                     (dir / "job.yaml").string() + "\nsampling:\n  max_new_tokens: 64\n");
  }
  ~PresetJob() { std::filesystem::remove_all(dir); }
  PlanOptions options(const std::string& preset, int world) const {
    PlanOptions o;
    o.job_path = (dir / "job.yaml").string();
    o.preset = preset;
    o.world_size = world;
    o.json = true;
    return o;
  }
};

json plan_of(const PlanOptions& o) {
  std::ostringstream out;
  EXPECT_EQ(run_plan(o, out), 0);
  return json::parse(out.str());
}

TEST(HardwarePresets, TableHoldsTheDatasheetFigures) {
  const HardwarePreset& h100 = hardware_preset("h100");
  EXPECT_EQ(h100.memory_gb, 80);
  EXPECT_EQ(h100.memory_tbs, 3.35);
  EXPECT_EQ(h100.bf16_dense_tflops, 989);
  EXPECT_EQ(h100.nvlink_gbs, 900);
  EXPECT_EQ(h100.internode_gbits, 400);
  const HardwarePreset& h200 = hardware_preset("h200");
  EXPECT_EQ(h200.memory_gb, 141);
  EXPECT_EQ(h200.memory_tbs, 4.8);
  EXPECT_EQ(h200.bf16_dense_tflops, 989);
  EXPECT_EQ(h200.nvlink_gbs, 900);
  const HardwarePreset& a100 = hardware_preset("a100");
  EXPECT_EQ(a100.memory_gb, 80);
  EXPECT_EQ(a100.memory_tbs, 2.039);
  EXPECT_EQ(a100.bf16_dense_tflops, 312);
  EXPECT_EQ(a100.nvlink_gbs, 600);
  EXPECT_EQ(a100.internode_gbits, 200);
  for (const HardwarePreset* p : {&h100, &h200, &a100}) EXPECT_EQ(p->gpus_per_node, 8) << p->name;
  EXPECT_TRUE(hardware_preset("cpu").measure_this_machine);
  EXPECT_EQ(hardware_preset_names(), "h100 | h200 | a100 | cpu");
}

TEST(HardwarePresets, ModelFiguresAreTheDatasheetTimesTheStatedFractions) {
  const HardwarePreset& h200 = hardware_preset("h200");
  EXPECT_DOUBLE_EQ(h200.memory_gbs(), 4800 * kMemoryBandwidthFraction);
  EXPECT_DOUBLE_EQ(h200.gemm_tflops(), 989 * kGemmFraction);
  EXPECT_DOUBLE_EQ(h200.allreduce_gbs(), 450 * kNvlinkAllreduceFraction);  // one direction of 900 GB/s
  EXPECT_DOUBLE_EQ(h200.internode_gbs(), 50 * kInternodeFraction);         // 400 Gb/s = 50 GB/s
  EXPECT_NEAR(h200.device_memory_gib(), 131.32, 0.01);
}

TEST(HardwarePresets, PresetFiguresReachTheCostModel) {
  PresetJob d;
  const json j = plan_of(d.options("h200", 16));
  const HardwarePreset& h200 = hardware_preset("h200");
  EXPECT_EQ(j["preset"], "h200");
  EXPECT_EQ(j["device"], "cuda");
  EXPECT_EQ(j["ranks_per_node"], 8);
  EXPECT_EQ(j["device_memory_bytes"], int64_t{141000000000});
  EXPECT_DOUBLE_EQ(j["alpha_us"].get<double>(), h200.nvlink_alpha_us);
  EXPECT_DOUBLE_EQ(j["bandwidth_gbs"].get<double>(), h200.allreduce_gbs());
  const json& m = j["machine"];
  EXPECT_DOUBLE_EQ(m["memory_gbs"].get<double>(), h200.memory_gbs());
  EXPECT_DOUBLE_EQ(m["gemm_tflops"].get<double>(), h200.gemm_tflops());
  EXPECT_DOUBLE_EQ(m["internode_gbs"].get<double>(), h200.internode_gbs());
  EXPECT_DOUBLE_EQ(m["internode_alpha_us"].get<double>(), h200.internode_alpha_us);
  EXPECT_EQ(m["memory_source"], "preset h200");
  EXPECT_EQ(m["gemm_source"], "preset h200");
  EXPECT_EQ(m["allreduce_source"], "preset h200");

  // Each layout's prediction is the cost model's on those figures.
  MachineModel machine;
  machine.memory_gbs = h200.memory_gbs();
  machine.gemm_tflops = h200.gemm_tflops();
  machine.alpha_us = h200.nvlink_alpha_us;
  machine.allreduce_gbs = h200.allreduce_gbs();
  machine.ranks_per_node = 8;
  machine.internode_alpha_us = h200.internode_alpha_us;
  machine.internode_gbs = h200.internode_gbs();
  const ModelConfig cfg = load_config_text("preset", llama31_70b());
  int predicted = 0;
  for (const auto& l : j["layouts"]) {
    if (l["speed"].is_null()) continue;
    ++predicted;
    const RowShape shape{l["speed"]["prompt_tokens"].get<int64_t>(), l["speed"]["new_tokens"].get<int64_t>(),
                         l["speed"]["rows_per_replica"].get<int64_t>(), j["max_batch_tokens"].get<int64_t>()};
    const SpeedPrediction p = predict_speed(cfg, Layout{16, l["tensor"].get<int>(), l["pipeline"].get<int>()},
                                            CostDtypes{DType::BF16, DType::BF16, DType::BF16}, machine, shape);
    EXPECT_NEAR(l["speed"]["tokens_per_s_total"].get<double>(), p.tokens_per_s_total, 1e-6 * p.tokens_per_s_total);
  }
  EXPECT_GE(predicted, 5);
}

TEST(HardwarePresets, GivenFlagsOverrideThePresetsFigures) {
  PresetJob d;
  PlanOptions o = d.options("h100", 16);
  o.speed.memory_gbs = 1000;
  o.device_memory_gib = 60;
  o.ranks_per_node = 4;
  o.alpha_us = 3;
  o.bandwidth_gbs = 100;
  o.internode_gbs = 12;
  o.internode_alpha_us = 20;
  const json j = plan_of(o);
  EXPECT_EQ(j["machine"]["memory_gbs"], 1000.0);
  EXPECT_EQ(j["machine"]["memory_source"], "given");
  EXPECT_DOUBLE_EQ(j["machine"]["gemm_tflops"].get<double>(), hardware_preset("h100").gemm_tflops());  // not given
  EXPECT_EQ(j["machine"]["gemm_source"], "preset h100");
  EXPECT_EQ(j["device_memory_bytes"], int64_t{60} << 30);
  EXPECT_EQ(j["ranks_per_node"], 4);
  EXPECT_EQ(j["alpha_us"], 3.0);
  EXPECT_EQ(j["bandwidth_gbs"], 100.0);
  EXPECT_EQ(j["machine"]["allreduce_source"], "given");
  EXPECT_EQ(j["internode_gbs"], 12.0);
  EXPECT_EQ(j["internode_alpha_us"], 20.0);
}

TEST(HardwarePresets, TheJobsRanksPerNodeBeatsThePresetsGpusPerNode) {
  PresetJob d;
  PlanOptions o = d.options("a100", 16);
  o.sets = {"parallel.ranks_per_node=4"};
  EXPECT_EQ(plan_of(o)["ranks_per_node"], 4);
}

TEST(HardwarePresets, UnknownPresetIsABadCommandLineNamingItAndTheValidOnes) {
  PresetJob d;
  std::ostringstream out;
  try {
    run_plan(d.options("h300", 8), out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
    const std::string what = e.what();
    EXPECT_NE(what.find("'h300'"), std::string::npos) << what;
    EXPECT_NE(what.find("h100, h200, a100, cpu"), std::string::npos) << what;
  }
}

TEST(HardwarePresets, PresetContradictingTheDeviceFlagIsABadCommandLine) {
  PresetJob d;
  PlanOptions o = d.options("h100", 8);
  o.device = "cpu";
  std::ostringstream out;
  try {
    run_plan(o, out);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitBadJob);
    EXPECT_NE(std::string(e.what()).find("--preset h100"), std::string::npos) << e.what();
  }
}

std::string run_binary(const std::string& args, int& rc) {
  const std::string cmd = std::string(TPBATCH_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string text;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) text.append(buf, n);
  const int status = pclose(p);
  rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return text;
}

TEST(HardwarePresets, PlanHelpListsThePresets) {
  if (!std::filesystem::exists(TPBATCH_BINARY)) GTEST_SKIP() << TPBATCH_BINARY << " absent";
  int rc = 0;
  const std::string help = run_binary("plan --help", rc);
  EXPECT_EQ(rc, 0);
  for (const char* name : {"h100", "h200", "a100", "cpu", "4.8 TB/s", "--internode-gbs"})
    EXPECT_NE(help.find(name), std::string::npos) << name << " not in:\n" << help;
}

TEST(HardwarePresets, BinaryExits2OnAnUnknownPreset) {
  if (!std::filesystem::exists(TPBATCH_BINARY)) GTEST_SKIP() << TPBATCH_BINARY << " absent";
  PresetJob d;
  int rc = 0;
  const std::string text = run_binary("plan " + (d.dir / "job.yaml").string() + " --preset h300", rc);
  EXPECT_EQ(rc, 2) << text;
  EXPECT_NE(text.find("unknown preset 'h300' (valid: h100, h200, a100, cpu)"), std::string::npos) << text;
}

// The 125M model's shapes: a quick calibration.
std::string config_125m() {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 768,
  "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12, "num_key_value_heads": 4,
  "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
  "tie_word_embeddings": false, "torch_dtype": "float32"})";
}

TEST(HardwarePresets, CpuPresetMeasuresThisMachine) {
  PresetJob d(config_125m());
  PlanOptions o = d.options("cpu", 1);
  o.speed.rows = 4;  // R(m) at 1, 4, 8, 16 rows only: a quick test
  o.speed.prompt_tokens = 64;
  const json j = plan_of(o);
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["preset"], "cpu");
  EXPECT_EQ(j["machine"]["memory_source"], "measured");
  EXPECT_EQ(j["machine"]["gemm_source"], "measured");
  EXPECT_TRUE(j["machine"].contains("calibration"));
}

}  // namespace
}  // namespace tpbatch
