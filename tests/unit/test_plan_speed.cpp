// `tpbatch plan` with the speed flags (plan/speed_report.h): the machine given as flags (an H200
// node) predicts every fitting layout as plan/cost_model.h does; no flags = the output of before;
// --calibrate outside mpirun measures memory and GEMM and says the allreduce was not measured. The
// CPU terms (measured R(m) points, attention rates, micro-batches, chunked prefill) against
// hand-computed cases on the 125M model's shapes.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "plan/cost_model.h"
#include "common/error.h"
#include "plan/plan_command.h"
#include "plan/speed_report.h"
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

// The 125M model of `tpbatch make-model --preset 125m`: per layer 768 x (768 + 2 x 256) + 768 x 768 +
// 3 x 768 x 2048 = 6,291,456 parameters, LM head 32000 x 768; 100,073,472 streamed parameters.
std::string config_125m() {
  return R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 768,
  "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12, "num_key_value_heads": 4,
  "vocab_size": 32000, "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
  "tie_word_embeddings": false, "torch_dtype": "float32"})";
}

// A CPU node as `plan --calibrate` describes it: 10 GB/s, peak 0.1 TFLOP/s, R(m) measured at 1, 16
// and 32 rows, attention 4 GFLOP/s at decode and 8 at prefill.
MachineModel cpu_node() {
  MachineModel m;
  m.memory_gbs = 10;
  m.gemm_tflops = 0.1;
  m.alpha_us = 10;
  m.allreduce_gbs = 2;
  m.gemm_rates = {{1, 0.004}, {16, 0.04}, {32, 0.05}};
  m.attention_tflops = 0.004;
  m.prefill_attention_tflops = 0.008;
  return m;
}

TEST(PlanSpeed, MeasuredGemmRatesInterpolateAndJoinThePeakCurve) {
  const MachineModel m = cpu_node();
  EXPECT_NEAR(gemm_rate_flops(m, 1), 0.004e12, 1.0);
  EXPECT_NEAR(gemm_rate_flops(m, 0.5), 0.002e12, 1.0);            // below the first point: its time
  EXPECT_NEAR(gemm_rate_flops(m, 8), (0.004 + 7.0 / 15 * 0.036) * 1e12, 1.0);  // 20.8 GFLOP/s
  EXPECT_NEAR(gemm_rate_flops(m, 24), 0.045e12, 1.0);
  // Past 32: peak x m / (m + m_half), m_half = 32 x (0.1 / 0.05 - 1) = 32 rows.
  EXPECT_NEAR(gemm_rate_flops(m, 64), 0.1e12 * 64 / 96, 1.0);
  EXPECT_NEAR(gemm_rate_flops(m, 32.0001), 0.05e12, 1e5);          // continuous at the last point
  MachineModel bad = m;
  bad.gemm_rates = {{16, 0.04}, {8, 0.05}};
  EXPECT_THROW(gemm_rate_flops(bad, 8), Error);
}

TEST(PlanSpeed, CpuDecodeStepCountsMeasuredGemmAndAttention) {
  const ModelConfig cfg = load_config_text("speed125", config_125m());
  const CostDtypes f32{DType::F32, DType::F32, DType::F32};
  const SpeedPrediction p = predict_speed(cfg, Layout{1, 1, 1}, f32, cpu_node(), RowShape{128, 64, 32, 2048});
  EXPECT_NEAR(p.weight_read_us, 400293888.0 / 10e3, 1e-6);                 // 40.0 ms
  EXPECT_NEAR(p.gemm_us, 32 * 2 * 100073472.0 / 0.05e12 * 1e6, 1e-6);     // 128.1 ms at R(32)
  EXPECT_NEAR(p.kv_read_us, 32 * 160 * 24576.0 / 10e3, 1e-6);              // 12.6 ms
  // 32 rows x 12 layers x 160 positions x 4 x 768 q dims = 188,743,680 FLOPs at 4 GFLOP/s.
  EXPECT_NEAR(p.attention_us, 47185.92, 1e-6);
  EXPECT_NEAR(p.decode_step_us, 128094.04416 + 47185.92, 1e-6);            // 175.3 ms
  // Prefill: 32 x 128 = 4096 tokens in 2 chunks of 2048 (16 rows). R(2048) = 0.1 x 2048 / 2080;
  // the 12 layers' 2048 x 2 x 75,497,472 FLOPs = 3140.69 ms; the LM head only on the chunk's 16
  // logit rows (their last prompt tokens), 16 x 2 x 24,576,000 FLOPs at R(16) = 0.04 TFLOP/s =
  // 19.66 ms (every token through it would be 1022.4 ms at R(2048)); attention 16 x 12 x 2 x 128^2 x
  // 768 = 4,831,838,208 FLOPs at 8 GFLOP/s = 603.98 ms; a chunk 3764.34 ms. The median row (16 of
  // 0..31) is in the second chunk: TTFT p50 = 2 chunks, as the whole prefill.
  EXPECT_EQ(p.prefill_chunks, 2);
  EXPECT_NEAR(p.ttft_s, 2 * 3.7643354112, 1e-9);
  EXPECT_NEAR(p.prefill_s, 2 * 3.7643354112, 1e-9);
  EXPECT_NEAR(p.batch_output_tokens_per_s, 32 * 64 / (2 * 3.7643354112 + 64 * 0.17527996416), 1e-6);
  // Without the attention rate the KV bytes alone: the accelerator's model.
  MachineModel kv_only = cpu_node();
  kv_only.attention_tflops = 0;
  EXPECT_NEAR(predict_speed(cfg, Layout{1, 1, 1}, f32, kv_only, RowShape{128, 64, 32, 2048}).attention_us, 12582.912,
              1e-6);
}

TEST(PlanSpeed, PipelineMicroBatchesRunAtTheirOwnRows) {
  const ModelConfig cfg = load_config_text("speed125pp", config_125m());
  const CostDtypes f32{DType::F32, DType::F32, DType::F32};
  const MachineModel m = cpu_node();
  const SpeedPrediction p = predict_speed(cfg, Layout{2, 1, 2}, f32, m, RowShape{128, 64, 32, 4096});
  EXPECT_EQ(p.micro_batch_rows, 16);
  // Stage 0: 6 layers; stage 1: 6 layers + the LM head; each at 16 rows, R(16) = 0.04 TFLOP/s.
  const double s0_gemm = 16 * 2 * 6 * 6291456.0 / 0.04e12 * 1e6;             // 30198.99 us
  const double s1_gemm = 16 * 2 * (6 * 6291456.0 + 24576000) / 0.04e12 * 1e6;  // 49859.0 us
  const double attn = 16 * 6 * 160 * 4 * 768.0 / 0.004e12 * 1e6;              // 11796.48 us per stage
  EXPECT_NEAR(p.gemm_us, s0_gemm + s1_gemm, 1e-6);
  EXPECT_NEAR(p.attention_us, 2 * attn, 1e-6);
  // Each stage serves both micro-batches: 2 x the last stage > the two in turn + a hand-off.
  EXPECT_NEAR(p.handoff_us, 10 + 16 * 768 * 4 / 2e3, 1e-9);
  EXPECT_NEAR(p.decode_step_us, 2 * (s1_gemm + attn), 1e-6);
  EXPECT_NEAR(p.tokens_per_s_replica, 32 / (p.decode_step_us * 1e-6), 1e-6);
  // Prefill: two micro-batches of 16 x 128 = 2048 tokens (one chunk each), R(2048) = 0.1 x 2048 / 2080.
  // Stage 0: 2048 x 2 x 6 layers FLOPs + attention 16 x 6 x 2 x 128^2 x 768 at 8 GFLOP/s = 1872.34 ms;
  // stage 1 the same + the LM head on the 16 logit rows, 16 x 2 x 24,576,000 FLOPs at R(16) =
  // 19.66 ms: 1892.00 ms; the hand-off 10 + 2048 x 768 x 4 B / 2 GB/s = 3155.73 us. The median row
  // is in the second micro-batch, one slowest stage behind the first: TTFT p50 = s0 + s1 + s1 +
  // hand-off = 5.659 s, which is also when the prefill ends.
  EXPECT_NEAR(p.ttft_s, (1872337.3056 + 2 * 1891998.1056 + 3155.728) * 1e-6, 1e-9);
  EXPECT_NEAR(p.prefill_s, p.ttft_s, 1e-12);
}

TEST(PlanSpeed, OversubscribedPipelineFillsAndDrainsOnTheIdleStagesCores) {
  // The case above on a node with twice the ranks its cores run at once (4 ranks x 1 thread on 2
  // cores: oversubscription 2). Stage times s0 = 1872.34 ms, s1 = 1892.00 ms are a rank's share
  // while every rank computes; piece 0 on stage 0 runs alone (stage 1 waits for it): twice as fast;
  // then piece 1 on stage 0 beside piece 0 on stage 1, both at their share; then piece 1 on stage 1
  // alone, twice as fast. TTFT = s0 / 2 + hand-off + s1 + s1 / 2 (piece 0 on stage 1 is the longer
  // of the middle pair) = 3.777 s, against 5.659 s when the idle stages' cores are not counted.
  const ModelConfig cfg = load_config_text("speed125ov", config_125m());
  const CostDtypes f32{DType::F32, DType::F32, DType::F32};
  MachineModel m = cpu_node();
  const SpeedPrediction plain = predict_speed(cfg, Layout{2, 1, 2}, f32, m, RowShape{128, 64, 32, 4096});
  m.oversubscription = 2;
  const SpeedPrediction p = predict_speed(cfg, Layout{2, 1, 2}, f32, m, RowShape{128, 64, 32, 4096});
  const double s0 = 1872337.3056, s1 = 1891998.1056, handoff = 3155.728;
  EXPECT_NEAR(p.ttft_s, (s0 / 2 + handoff + s1 + s1 / 2) * 1e-6, 1e-9);
  EXPECT_NEAR(p.prefill_s, p.ttft_s, 1e-12);
  EXPECT_NEAR(plain.ttft_s, (s0 + handoff + 2 * s1) * 1e-6, 1e-9);
  // Decode keeps every stage busy with a micro-batch: no idle cores, the same step.
  EXPECT_NEAR(p.decode_step_us, plain.decode_step_us, 1e-9);
  // Without a pipeline every rank always computes: oversubscription changes nothing.
  MachineModel one = cpu_node();
  const SpeedPrediction tp1 = predict_speed(cfg, Layout{1, 1, 1}, f32, one, RowShape{128, 64, 32, 4096});
  one.oversubscription = 2;
  EXPECT_NEAR(predict_speed(cfg, Layout{1, 1, 1}, f32, one, RowShape{128, 64, 32, 4096}).ttft_s, tp1.ttft_s, 1e-12);
}

TEST(PlanSpeed, StepOverheadIsPaidPerRowPerLayerAndForTheLogitsShard) {
  const ModelConfig cfg = load_config_text("speed125oh", config_125m());
  const CostDtypes f32{DType::F32, DType::F32, DType::F32};
  MachineModel m = cpu_node();
  const SpeedPrediction none = predict_speed(cfg, Layout{2, 2, 1}, f32, m, RowShape{128, 64, 32, 4096});
  EXPECT_EQ(none.overhead_us, 0.0);
  m.layer_overhead_us = 10;
  m.logits_overhead_us = 200;
  const SpeedPrediction p = predict_speed(cfg, Layout{2, 2, 1}, f32, m, RowShape{128, 64, 32, 4096});
  // 32 rows x (12 layers x 10 us + 200 us / TP 2 for the vocabulary shard) = 7040 us a step.
  EXPECT_NEAR(p.overhead_us, 7040, 1e-9);
  EXPECT_NEAR(p.decode_step_us - none.decode_step_us, 7040, 1e-6);
  // Prefill, one chunk of 4096 tokens: 4096 x 12 x 10 us + 32 rows x 100 us = 494,720 us.
  EXPECT_NEAR(p.ttft_s - none.ttft_s, 0.49472, 1e-9);
  m.logits_overhead_us = -1;
  EXPECT_THROW(predict_speed(cfg, Layout{2, 2, 1}, f32, m, RowShape{128, 64, 32, 4096}), Error);
}

TEST(PlanSpeed, CpuRanksShareTheNodesRatesAndGivenRatesAreReported) {
  SpeedJob d;
  PlanOptions o;
  o.job_path = (d.dir / "job.yaml").string();
  o.world_size = 2;
  o.device = "cpu";
  o.device_memory_gib = 64;
  o.alpha_us = 10;
  o.bandwidth_gbs = 2;
  o.speed.memory_gbs = 10;
  o.speed.gemm_tflops = 0.1;
  o.speed.gemm_rates = parse_gemm_rates("1:0.004,16:0.04,32:0.05");
  o.speed.attention_tflops = 0.004;
  o.speed.prefill_attention_tflops = 0.008;
  o.speed.layer_overhead_us = 3;
  o.speed.logits_overhead_us = 50;
  o.speed.prompt_tokens = 128;
  o.speed.new_tokens = 64;
  o.speed.rows = 8;
  o.json = true;
  std::ostringstream out;
  ASSERT_EQ(run_plan(o, out), 0);
  const json j = json::parse(out.str());
  EXPECT_EQ(j["machine"]["gemm_rates_source"], "given");
  EXPECT_EQ(j["machine"]["attention_source"], "given");
  EXPECT_EQ(j["machine"]["ranks_sharing_node"], 2);
  EXPECT_NEAR(j["machine"]["per_rank"]["gemm_rates"][1]["tflops"].get<double>(), 0.02, 1e-12);
  EXPECT_NEAR(j["machine"]["per_rank"]["attention_tflops"].get<double>(), 0.002, 1e-12);
  EXPECT_EQ(j["machine"]["overhead_source"], "given");
  EXPECT_NEAR(j["machine"]["per_rank"]["layer_overhead_us"].get<double>(), 6, 1e-12);  // half the node: twice the time
  MachineModel rank = cpu_node();
  rank.memory_gbs = 5;
  rank.gemm_tflops = 0.05;
  for (GemmRate& g : rank.gemm_rates) g.tflops /= 2;
  rank.attention_tflops /= 2;
  rank.prefill_attention_tflops /= 2;
  rank.layer_overhead_us = 6;
  rank.logits_overhead_us = 100;
  const ModelConfig cfg = load_config_text("speedshare", llama31_8b());
  for (const auto& l : j["layouts"]) {
    if (l["speed"].is_null()) continue;
    const SpeedPrediction p = predict_speed(cfg, Layout{2, l["tensor"].get<int>(), l["pipeline"].get<int>()},
                                            CostDtypes{DType::BF16, DType::F32, DType::F32}, rank,
                                            RowShape{128, 64, 8, 4096});
    EXPECT_NEAR(l["speed"]["decode_step_us"].get<double>(), p.decode_step_us, 1e-6);
    EXPECT_NEAR(l["speed"]["attention_us"].get<double>(), p.attention_us, 1e-6);
  }
}

TEST(PlanSpeed, EachLayoutTakesTheAlphaMeasuredAtItsTensorSize) {
  // A calibration of 4 ranks x 1 thread on 2 cores: the allreduce between GEMMs measured in pairs
  // (TP=2: 2000 us) and in one group of 4 (TP=4: 600 us). TP=2 layouts predict with 2000 us, TP=4
  // with 600 us; the node's 4 ranks on 2 cores are oversubscribed 2x.
  const ModelConfig cfg = load_config_text("speedalpha", config_125m());
  Calibration cal;
  cal.memory_gbs = 10;
  cal.gemm_tflops = 0.1;
  cal.gemm_threads = 1;
  cal.cores = 2;
  cal.ranks_measuring = 4;
  cal.allreduce_measured = true;
  cal.allreduce_ranks = 4;
  cal.alpha_us = 10;
  cal.allreduce_gbs = 2;
  cal.synced_alpha_us = 600;
  cal.synced_alphas = {{2, 2000.0}, {4, 600.0}};
  PlanInputs in;
  in.world_size = 4;
  in.ranks_per_node = 4;
  in.device_memory_bytes = int64_t{64} << 30;
  in.weight_dtype = in.kv_dtype = in.activation_dtype = DType::F32;
  in.max_seqs = 32;
  in.row_tokens = 192;
  in.alpha_us = 600;  // plan_command puts the whole world's figure here
  in.bandwidth_gbs = 2;
  const Plan plan = make_plan(cfg, in);
  SpeedRequest r;
  r.calibrate = true;
  r.prompt_tokens = 128;
  r.new_tokens = 64;
  r.rows = 32;
  r.alpha_measured = true;
  const SpeedReport rep = make_speed_report(r, cal, "measured", plan, cfg, 64);
  EXPECT_EQ(rep.rank.oversubscription, 2.0);  // 4 ranks x 1 thread / 2 cores
  int checked = 0;
  for (size_t i = 0; i < plan.layouts.size(); ++i) {
    const LayoutLedger& g = plan.layouts[i];
    if (!rep.layouts[i].predicted || g.tensor == 1) continue;
    const double expected_alpha = g.tensor == 2 ? 2000.0 : 600.0;
    EXPECT_EQ(rep.layouts[i].alpha_us, expected_alpha) << g.tensor << "x" << g.pipeline;
    MachineModel m = rep.rank;
    m.alpha_us = expected_alpha;
    const SpeedPrediction p = predict_speed(cfg, Layout{4, g.tensor, g.pipeline}, CostDtypes{DType::F32, DType::F32, DType::F32},
                                            m, rep.layouts[i].shape);
    EXPECT_NEAR(rep.layouts[i].p.decode_step_us, p.decode_step_us, 1e-9);
    ++checked;
  }
  EXPECT_GE(checked, 2);  // TP=2 (x PP=2 or x DP=2) and TP=4
  // Not measured (alpha given): the plan's alpha for every layout.
  r.alpha_measured = false;
  const SpeedReport given = make_speed_report(r, cal, "given", plan, cfg, 64);
  for (const LayoutSpeed& l : given.layouts)
    if (l.predicted) EXPECT_EQ(l.alpha_us, 600.0);
}

TEST(PlanSpeed, GemmRatesFlagIsCheckedByItem) {
  EXPECT_EQ(parse_gemm_rates("1:0.5,8:2").size(), 2u);
  for (const char* bad : {"", "8", "8:", "x:1", "8:0", "8:1,4:2", "8:1,,16:2"}) {
    try {
      parse_gemm_rates(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--gemm-rates"), std::string::npos) << e.what();
    }
  }
}

TEST(PlanSpeed, CalibrateOutsideMpiMeasuresMemoryAndGemmOnly) {
  SpeedJob d;
  PlanOptions o;
  o.job_path = (d.dir / "job.yaml").string();
  o.world_size = 1;
  o.device = "cpu";
  o.device_memory_gib = 64;
  o.speed.calibrate = true;
  o.speed.rows = 4;  // R(m) at 1, 4, 8, 16 rows only: a quick test
  o.speed.prompt_tokens = 64;
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
  EXPECT_EQ(j["machine"]["gemm_rates_source"], "measured");
  EXPECT_EQ(j["machine"]["attention_source"], "measured");
  const json& cal = j["machine"]["calibration"];
  ASSERT_EQ(cal["gemm_rates"].size(), 4u);
  EXPECT_EQ(cal["gemm_rates"][3]["rows"], 16.0);
  EXPECT_GT(cal["gemm_rates"][3]["tflops"].get<double>(), 1e-5);
  EXPECT_GT(cal["attention_tflops"].get<double>(), 1e-6);
  EXPECT_GT(cal["prefill_attention_tflops"].get<double>(), 1e-6);
  EXPECT_EQ(cal["ranks_measuring"], 1);
  EXPECT_GT(cal["layer_overhead_us"].get<double>(), 0.0);
  EXPECT_GT(cal["logits_overhead_us"].get<double>(), 0.0);
  EXPECT_EQ(j["machine"]["overhead_source"], "measured");
  EXPECT_GT(j["layouts"][0]["speed"]["attention_us"].get<double>(), 0.0);
}

}  // namespace
}  // namespace tpbatch
