// `tpbatch plan` with the speed flags (plan/speed_report.h): the machine given as flags (an H200
// node) predicts every fitting layout as plan/cost_model.h does; no flags = the output of before;
// --calibrate outside mpirun measures memory and GEMM and says the allreduce was not measured.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plan/cost_model.h"
#include "plan/plan_command.h"
#include "test_plan_util.h"

namespace tpbatch {
namespace {

using namespace plan_test;
using nlohmann::json;

struct SpeedJob {
  std::filesystem::path dir;
  SpeedJob() {
    dir = make_temp_dir("speed");
    std::filesystem::create_directories(dir / "model");
    write_file(dir / "model" / "config.json", llama31_8b());
    write_file(dir / "job.yaml", "model: " + (dir / "model").string() + "\ninput:\n  path: " +
                                     (dir / "job.yaml").string() + "\nsampling:\n  max_new_tokens: 64\n");
  }
  ~SpeedJob() { std::filesystem::remove_all(dir); }
};

PlanOptions h200_node(const SpeedJob& d) {
  PlanOptions o;
  o.job_path = (d.dir / "job.yaml").string();
  o.world_size = 8;
  o.device_memory_gib = 130;
  o.alpha_us = 5;
  o.bandwidth_gbs = 450;
  o.speed.memory_gbs = 4800;
  o.speed.gemm_tflops = 990;
  o.speed.prompt_tokens = 128;
  o.speed.new_tokens = 64;
  o.speed.rows = 1;
  return o;
}

TEST(PlanSpeed, GivenMachinePredictsEveryLayoutAsTheCostModel) {
  SpeedJob d;
  PlanOptions o = h200_node(d);
  o.json = true;
  std::ostringstream out;
  ASSERT_EQ(run_plan(o, out), 0);
  const json j = json::parse(out.str());
  EXPECT_EQ(j["machine"]["memory_gbs"], 4800.0);
  EXPECT_EQ(j["machine"]["per_rank"]["memory_gbs"], 4800.0);  // an accelerator is not shared
  EXPECT_EQ(j["machine"]["memory_source"], "given");
  EXPECT_EQ(j["machine"]["allreduce_source"], "given");
  const ModelConfig cfg = load_config_text("speed", llama31_8b());
  MachineModel m{4800, 990, 0, 5, 450};
  int predicted = 0;
  for (const auto& l : j["layouts"]) {
    ASSERT_TRUE(l.contains("speed"));
    if (l["speed"].is_null()) continue;
    ++predicted;
    const SpeedPrediction p = predict_speed(cfg, Layout{8, l["tensor"].get<int>(), l["pipeline"].get<int>()},
                                            CostDtypes{DType::BF16, DType::BF16, DType::BF16}, m, RowShape{128, 64, 1});
    EXPECT_NEAR(l["speed"]["decode_step_us"].get<double>(), p.decode_step_us, 1e-6);
    EXPECT_NEAR(l["speed"]["tokens_per_s_total"].get<double>(), p.tokens_per_s_total, 1e-6);
    EXPECT_NEAR(l["speed"]["ttft_s"].get<double>(), p.ttft_s, 1e-12);
    if (l["tensor"] == 1 && l["pipeline"] == 1) {
      EXPECT_NEAR(p.decode_step_us, 3131.3, 1.0);  // ~15 GB / 4.8 TB/s
      EXPECT_NEAR(p.tokens_per_s_total, 8 * 1e6 / p.decode_step_us, 1e-6);
    }
  }
  EXPECT_GE(predicted, 4);
}

TEST(PlanSpeed, WithoutSpeedFlagsThePlanIsUnchanged) {
  SpeedJob d;
  PlanOptions o = h200_node(d);
  o.speed = SpeedRequest{};
  o.json = true;
  std::ostringstream out;
  ASSERT_EQ(run_plan(o, out), 0);
  const json j = json::parse(out.str());
  EXPECT_FALSE(j.contains("machine"));
  EXPECT_FALSE(j["layouts"][0].contains("speed"));
  o.json = false;
  std::ostringstream text;
  run_plan(o, text);
  EXPECT_EQ(text.str().find("predicted speed"), std::string::npos);
}

TEST(PlanSpeed, TextHasTheSpeedTable) {
  SpeedJob d;
  PlanOptions o = h200_node(d);
  std::ostringstream out;
  ASSERT_EQ(run_plan(o, out), 0);
  EXPECT_NE(out.str().find("predicted speed"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("tok/s replica"), std::string::npos);
}

TEST(PlanSpeed, CalibrateOutsideMpiMeasuresMemoryAndGemmOnly) {
  SpeedJob d;
  PlanOptions o;
  o.job_path = (d.dir / "job.yaml").string();
  o.world_size = 1;
  o.device = "cpu";
  o.device_memory_gib = 64;
  o.speed.calibrate = true;
  o.json = true;
  std::ostringstream out;
  ASSERT_EQ(run_plan(o, out), 0);
  const json j = json::parse(out.str());
  EXPECT_EQ(j["machine"]["memory_source"], "measured");
  EXPECT_EQ(j["machine"]["gemm_source"], "measured");
  EXPECT_EQ(j["machine"]["allreduce_source"], "default");
  EXPECT_FALSE(j["machine"]["calibration"]["allreduce_measured"].get<bool>());
  EXPECT_GT(j["machine"]["memory_gbs"].get<double>(), 0.01);
  EXPECT_GT(j["machine"]["gemm_tflops"].get<double>(), 1e-4);
}

}  // namespace
}  // namespace tpbatch
