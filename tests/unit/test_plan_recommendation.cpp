// `tpbatch plan`'s throughput recommendation is the layout its own cost model predicts fastest
// among the layouts that fit: never a layout the speed table ranks below another fitting one.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "plan/hardware_presets.h"
#include "plan/layout_recommendation.h"
#include "plan/plan_command.h"
#include "test_plan_util.h"

namespace tpbatch {
namespace {

using namespace plan_test;
using nlohmann::json;

struct RecommendationJob {
  std::filesystem::path dir;
  RecommendationJob(const std::string& config_json, int64_t max_seqs) {
    dir = make_temp_dir("recommend");
    std::filesystem::create_directories(dir / "model");
    write_file(dir / "model" / "config.json", config_json);
    write_file(dir / "job.yaml", "model: " + (dir / "model").string() + "\ninput:\n  path: " +
                                     (dir / "job.yaml").string() + "\nengine:\n  max_seqs: " +
                                     std::to_string(max_seqs) + "\n");
  }
  ~RecommendationJob() { std::filesystem::remove_all(dir); }
  std::string job() const { return (dir / "job.yaml").string(); }
};

json plan_json_of(PlanOptions o) {
  o.json = true;
  std::ostringstream out;
  EXPECT_EQ(run_plan(o, out), 0);
  return json::parse(out.str());
}

// The recommended layout's predicted total tokens/s is at least every fitting layout's.
void expect_recommendation_is_the_fastest(const json& j) {
  ASSERT_FALSE(j["recommended"]["throughput"].is_null());
  const json& rec = j["recommended"]["throughput"];
  double recommended = -1, fastest = -1;
  std::string fastest_name;
  for (const auto& l : j["layouts"]) {
    if (!l["fits"].get<bool>()) continue;
    ASSERT_FALSE(l["speed"].is_null()) << "a fitting layout without a prediction";
    const double tps = l["speed"]["tokens_per_s_total"].get<double>();
    if (l["tensor"] == rec["tensor"] && l["pipeline"] == rec["pipeline"]) recommended = tps;
    if (tps > fastest) {
      fastest = tps;
      fastest_name = "TP" + l["tensor"].dump() + " x PP" + l["pipeline"].dump();
    }
  }
  ASSERT_GT(recommended, 0) << "the recommended layout has no prediction";
  EXPECT_GE(recommended, fastest) << "recommended TP" << rec["tensor"] << " x PP" << rec["pipeline"] << " at "
                                  << recommended << " tok/s, but " << fastest_name << " is predicted at " << fastest;
}

// The README's H200 figures (140 GiB, 4.8 TB/s, 990 TFLOP/s, alpha 5 us, 450 GB/s) for Llama-3.1-70B
// on 2 nodes x 8 GPUs, 400 rows a replica: TP=2 x DP=8 holds 323 rows, TP=4 x DP=4 all 400; the
// cost model predicts TP=2 faster, so TP=2 is the recommendation.
TEST(PlanRecommendation, Llama70BOnTwoH200NodesIsTheFastestPredictedLayout) {
  RecommendationJob d(llama31_70b(), 400);
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 16;
  o.ranks_per_node = 8;
  o.device = "cuda";
  o.device_memory_gib = 140;
  o.alpha_us = 5;
  o.bandwidth_gbs = 450;
  o.speed.memory_gbs = 4800;
  o.speed.gemm_tflops = 990;
  const json j = plan_json_of(o);
  expect_recommendation_is_the_fastest(j);
  EXPECT_EQ(j["recommended"]["throughput"]["tensor"], 2);
  EXPECT_EQ(j["recommended"]["throughput"]["data"], 8);
}

PlanOptions preset_plan(const RecommendationJob& d, const std::string& preset, int nodes) {
  PlanOptions o;
  o.job_path = d.job();
  o.preset = preset;
  o.world_size = 8 * nodes;
  return o;
}

// The property on a few shapes: 8B and 70B, one and two 8-GPU nodes, a batch that every layout
// holds (64 rows) and one that the smaller layouts cannot (400), on each accelerator preset.
TEST(PlanRecommendation, IsTheFastestFittingLayoutOnEveryPresetModelAndNodeCount) {
  for (const char* model : {"8b", "70b"})
    for (int64_t max_seqs : {64, 400}) {
      RecommendationJob d(std::string(model) == "8b" ? llama31_8b() : llama31_70b(), max_seqs);
      for (const char* preset : {"h100", "h200", "a100"})
        for (int nodes : {1, 2}) {
          SCOPED_TRACE(std::string(model) + " " + preset + " on " + std::to_string(nodes) + " nodes, max_seqs " +
                       std::to_string(max_seqs));
          expect_recommendation_is_the_fastest(plan_json_of(preset_plan(d, preset, nodes)));
        }
    }
}

// Without a preset or figures an accelerator plan ranks the layouts on the default preset's rates,
// speed table or not, and recommends the top.
TEST(PlanRecommendation, WithoutFiguresTheDefaultPresetsRatesRankTheLayouts) {
  RecommendationJob d(llama31_70b(), 64);
  PlanOptions o;
  o.job_path = d.job();
  o.world_size = 16;
  o.ranks_per_node = 8;
  o.device_memory_gib = 74.5;
  const json plain = plan_json_of(o);
  EXPECT_FALSE(plain["layouts"][0].contains("speed"));
  o.preset = kDefaultAcceleratorPreset;  // the same rates, and the speed table
  const json with_table = plan_json_of(o);
  expect_recommendation_is_the_fastest(with_table);
  EXPECT_EQ(plain["recommended"]["throughput"], with_table["recommended"]["throughput"]);
}

// Llama-3.1-8B fits one GPU: no collective is faster than none, so every GPU is its own replica.
TEST(PlanRecommendation, Llama8BOnOneH100NodeIsPureDataParallel) {
  RecommendationJob d(llama31_8b(), 64);
  const json j = plan_json_of(preset_plan(d, "h100", 1));
  EXPECT_EQ(j["recommended"]["throughput"]["tensor"], 1);
  EXPECT_EQ(j["recommended"]["throughput"]["pipeline"], 1);
  EXPECT_EQ(j["recommended"]["throughput"]["data"], 8);
}

TEST(PlanRecommendation, JsonCarriesTheRecommendedLayoutsPrediction) {
  RecommendationJob d(llama31_70b(), 64);
  const json j = plan_json_of(preset_plan(d, "h200", 2));
  const json& rec = j["recommended"]["throughput"];
  for (const auto& l : j["layouts"])
    if (l["tensor"] == rec["tensor"] && l["pipeline"] == rec["pipeline"])
      EXPECT_DOUBLE_EQ(rec["predicted_tokens_per_s_total"].get<double>(), l["speed"]["tokens_per_s_total"].get<double>());
}

TEST(PlanRecommendation, TextSaysTheThroughputLayoutIsTheMostPredictedTokensPerSecond) {
  RecommendationJob d(llama31_70b(), 64);
  std::ostringstream out;
  ASSERT_EQ(run_plan(preset_plan(d, "h200", 2), out), 0);
  EXPECT_NE(out.str().find("recommended for throughput: tensor "), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("the most predicted output tokens/s in total of the layouts that fit"), std::string::npos)
      << out.str();
}

TEST(PlanRecommendation, LatencyIsTheLargestTensorParallelismThatFits) {
  RecommendationJob d(llama31_70b(), 64);
  const json j = plan_json_of(preset_plan(d, "h100", 2));
  EXPECT_EQ(j["recommended"]["latency"]["tensor"], 8);  // TP groups stay within an 8-GPU node
  EXPECT_EQ(j["recommended"]["latency"]["pipeline"], 1);
}

TEST(PlanRecommendation, NothingIsRecommendedWhenNoLayoutFits) {
  const ModelConfig cfg = load_config_text("405b", llama31_405b());
  PlanInputs in;
  in.world_size = 8;
  in.ranks_per_node = 8;
  in.accelerator = true;
  in.device_memory_bytes = int64_t{16} << 30;
  Plan plan = make_plan(cfg, in);
  recommend_layouts(plan, make_speed_report(SpeedRequest{}, std::nullopt, "default", plan, cfg, 64));
  EXPECT_FALSE(plan.throughput.has_value());
  EXPECT_FALSE(plan.latency.has_value());
}

}  // namespace
}  // namespace tpbatch
