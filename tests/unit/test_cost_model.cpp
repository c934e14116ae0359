// The plan's cost model (plan/cost_model.h) against hand-computed cases on an H200-like machine
// (4.8 TB/s, 990 TFLOP/s bf16, NVLink 450 GB/s, alpha 5 us) and Llama-3.1-8B bf16.
#include "plan/cost_model.h"

#include <gtest/gtest.h>

#include "common/error.h"

#include "test_plan_util.h"

namespace tpbatch {
namespace {

MachineModel h200() {
  MachineModel m;
  m.memory_gbs = 4800.0;
  m.gemm_tflops = 990.0;
  m.gemm_half_rows = 0.0;
  m.alpha_us = 5.0;
  m.allreduce_gbs = 450.0;
  return m;
}

CostDtypes bf16() { return CostDtypes{DType::BF16, DType::BF16, DType::BF16}; }

// Llama-3.1-8B: per layer q,o 4096x4096, k,v 1024x4096, gate,up,down 3 x 14336x4096; LM head
// 128256x4096 (untied; the embedding table is not streamed).
constexpr double kLayerParams = 2.0 * 4096 * 4096 + 2.0 * 1024 * 4096 + 3.0 * 14336 * 4096;  // 218,103,808
constexpr double kLmHeadParams = 128256.0 * 4096;
constexpr double kParams = 32 * kLayerParams + kLmHeadParams;  // 7,504,924,672
// KV bytes per token of the whole model: 2 x 8 heads x 128 x 2 B x 32 layers.
constexpr double kKvPerToken = 2.0 * 8 * 128 * 2 * 32;

TEST(CostModel, Llama8bTp1Batch1IsTheWeightStream) {
  const ModelConfig cfg = plan_test::load_config_text("cost8b", plan_test::llama31_8b());
  RowShape shape{128, 64, 1};
  const SpeedPrediction p = predict_speed(cfg, Layout{1, 1, 1}, bf16(), h200(), shape);
  const double weight_us = kParams * 2 / 4800e3;                  // 3126.94 us: ~15 GB / 4.8 TB/s
  EXPECT_NEAR(p.weight_read_us, weight_us, 0.01);
  EXPECT_NEAR(weight_us, 3126.94, 0.01);
  EXPECT_NEAR(p.gemm_us, 2 * kParams / 990e12 * 1e6, 1e-3);       // 15.2 us: far below the stream
  EXPECT_NEAR(p.kv_read_us, (128 + 32) * kKvPerToken / 4800e3, 1e-6);  // 4.37 us
  EXPECT_EQ(p.allreduce_us, 0.0);
  EXPECT_EQ(p.handoff_us, 0.0);
  EXPECT_NEAR(p.decode_step_us, weight_us + p.kv_read_us, 0.01);
  EXPECT_NEAR(p.decode_step_us, 3131.4, 0.5);                     // ~3.1-3.3 ms
  EXPECT_NEAR(p.tokens_per_s_replica, 1e6 / p.decode_step_us, 1e-6);
  EXPECT_NEAR(p.tokens_per_s_total, p.tokens_per_s_replica, 1e-9);
  // Prefill of 128 tokens: 128 x 2 x params + attention 2 x 128^2 x 4096 x 32 layers FLOPs at
  // 990 TFLOP/s is 1.95 ms, below the 3.13 ms weight stream, so TTFT is the stream.
  EXPECT_NEAR(p.ttft_s, weight_us * 1e-6, 1e-8);
}

TEST(CostModel, TensorParallelHalvesTheStreamAndPaysAllreduces) {
  const ModelConfig cfg = plan_test::load_config_text("cost8b2", plan_test::llama31_8b());
  RowShape shape{128, 64, 1};
  const SpeedPrediction p = predict_speed(cfg, Layout{2, 2, 1}, bf16(), h200(), shape);
  EXPECT_NEAR(p.weight_read_us, kParams * 2 / 2 / 4800e3, 0.01);
  // 2 x 32 + 1 (the embedding) allreduces of 4096 x 2 B: 5 us + 2(1/2) x 8192 B / 450e3 B/us each;
  // and the allgather of the row's 16-byte logit statistics: 5 us + 1 x 16 B / 450e3 B/us.
  EXPECT_NEAR(p.allreduce_us, 65 * (5.0 + 8192.0 / 450e3) + 5.0 + 16.0 / 450e3, 1e-6);  // 331.18 us
  EXPECT_NEAR(p.decode_step_us, p.weight_read_us + p.kv_read_us / 1.0 + p.allreduce_us, 0.01);
  EXPECT_NEAR(p.kv_read_us, (128 + 32) * kKvPerToken / 2 / 4800e3, 1e-6);
}

TEST(CostModel, PipelineAddsHandOffsAndDataParallelMultipliesThroughput) {
  const ModelConfig cfg = plan_test::load_config_text("cost8b3", plan_test::llama31_8b());
  RowShape shape{128, 64, 8};
  const SpeedPrediction one = predict_speed(cfg, Layout{1, 1, 1}, bf16(), h200(), shape);
  const SpeedPrediction pp = predict_speed(cfg, Layout{2, 1, 2}, bf16(), h200(), shape);
  const SpeedPrediction dp = predict_speed(cfg, Layout{2, 1, 1}, bf16(), h200(), shape);
  // Two micro-batches of 4 rows, one per stage in flight; a hand-off is 4 rows x 4096 x 2 B. Each
  // stage serves both micro-batches per step, streaming its weights for each: the step is twice
  // the slower stage, the last (16 layers + the LM head), which exceeds the two stages in turn
  // plus the hand-off by the LM head's stream (219 us vs 5.07 us).
  EXPECT_EQ(pp.micro_batch_rows, 4);
  EXPECT_NEAR(pp.handoff_us, 5.0 + 4 * 8192.0 / 450e3, 1e-9);
  const double last_stage_us = (16 * kLayerParams + kLmHeadParams) * 2 / 4800e3 + 4 * 160 * kKvPerToken / 2 / 4800e3;
  EXPECT_NEAR(pp.decode_step_us, 2 * last_stage_us, 0.01);
  EXPECT_GT(pp.decode_step_us, one.decode_step_us + pp.handoff_us);
  EXPECT_NEAR(dp.decode_step_us, one.decode_step_us, 1e-9);
  EXPECT_NEAR(dp.tokens_per_s_total, 2 * one.tokens_per_s_total, 1e-6);
  EXPECT_NEAR(one.tokens_per_s_replica, 8e6 / one.decode_step_us, 1e-6);
}

// Ranks are numbered TP fastest, then PP, then DP (topology/layout.h): on nodes of 2, TP=2 x PP=2
// puts the two stages on two nodes, and TP=1 x PP=2 x DP=2 keeps each replica on one node.
TEST(CostModel, HandOffBetweenNodesPaysTheInterNodeFigures) {
  const ModelConfig cfg = plan_test::load_config_text("cost8b-nodes", plan_test::llama31_8b());
  RowShape shape{128, 64, 8};
  MachineModel m = h200();
  m.ranks_per_node = 2;
  m.internode_alpha_us = 10.0;
  m.internode_gbs = 40.0;
  EXPECT_TRUE(handoff_crosses_nodes(Layout{4, 2, 2}, 0, 2));
  EXPECT_FALSE(handoff_crosses_nodes(Layout{4, 1, 2}, 0, 2));
  EXPECT_FALSE(handoff_crosses_nodes(Layout{4, 2, 2}, 0, 0));  // 0: one node
  const SpeedPrediction across = predict_speed(cfg, Layout{4, 2, 2}, bf16(), m, shape);
  // Two micro-batches of 4 rows: one hand-off of 4 x 4096 x 2 B over the network.
  EXPECT_NEAR(across.handoff_us, 10.0 + 4 * 8192.0 / 40e3, 1e-9);
  const SpeedPrediction within = predict_speed(cfg, Layout{4, 1, 2}, bf16(), m, shape);
  EXPECT_NEAR(within.handoff_us, 5.0 + 4 * 8192.0 / 450e3, 1e-9);
  // Without inter-node figures a crossing hand-off costs what one within a node does.
  m.internode_alpha_us = 0.0;
  m.internode_gbs = 0.0;
  EXPECT_NEAR(predict_speed(cfg, Layout{4, 2, 2}, bf16(), m, shape).handoff_us, 5.0 + 4 * 8192.0 / 450e3, 1e-9);
}

TEST(CostModel, LargeBatchesBecomeComputeBound) {
  const ModelConfig cfg = plan_test::load_config_text("cost8b4", plan_test::llama31_8b());
  RowShape shape{128, 64, 1024};
  MachineModel m = h200();
  const SpeedPrediction p = predict_speed(cfg, Layout{1, 1, 1}, bf16(), m, shape);
  const double gemm_us = 1024 * 2 * kParams / 990e12 * 1e6;  // 15.5 ms > 3.1 ms stream
  EXPECT_NEAR(p.gemm_us, gemm_us, 0.01);
  EXPECT_NEAR(p.decode_step_us, gemm_us + p.kv_read_us, 0.01);
  // R(m) = peak x m / (m + m_half): with m_half = 1024 half the peak at 1024 rows.
  m.gemm_half_rows = 1024;
  EXPECT_NEAR(gemm_rate_flops(m, 1024), 495e12, 1.0);
  const SpeedPrediction slow = predict_speed(cfg, Layout{1, 1, 1}, bf16(), m, shape);
  EXPECT_NEAR(slow.gemm_us, 2 * gemm_us, 0.02);
}

TEST(CostModel, AllreduceIsTheAlphaBetaRing) {
  MachineModel m = h200();
  EXPECT_EQ(allreduce_us(1e6, 1, m), 0.0);
  EXPECT_NEAR(allreduce_us(1e6, 2, m), 5.0 + 1e6 / 450e3, 1e-9);
  EXPECT_NEAR(allreduce_us(1e6, 8, m), 5.0 + 2.0 * 7 / 8 * 1e6 / 450e3, 1e-9);
}

TEST(CostModel, CollectivesFollowTheStagesThatCallThem) {
  // TP=2 x PP=2, 8 rows = two micro-batches of 4: stage 0 allreduces 2 x 16 layers + the embedding,
  // stage 1 2 x 16 layers and allgathers its 4 rows' logit statistics (4 x 16 B from each rank).
  const ModelConfig cfg = plan_test::load_config_text("cost8b6", plan_test::llama31_8b());
  const SpeedPrediction p = predict_speed(cfg, Layout{4, 2, 2}, bf16(), h200(), RowShape{128, 64, 8});
  const double ar = 5.0 + 4 * 8192.0 / 450e3;  // 4 rows x 4096 x 2 B
  EXPECT_NEAR(p.allreduce_us, 33 * ar + 32 * ar + (5.0 + 64.0 / 450e3), 1e-6);
  EXPECT_NEAR(allgather_us(64, 2, h200()), 5.0 + 64.0 / 450e3, 1e-12);
  EXPECT_NEAR(allgather_us(64, 8, h200()), 5.0 + 7 * 64.0 / 450e3, 1e-12);
  EXPECT_EQ(allgather_us(64, 1, h200()), 0.0);
}

TEST(CostModel, BadInputIsRefused) {
  const ModelConfig cfg = plan_test::load_config_text("cost8b5", plan_test::llama31_8b());
  MachineModel m = h200();
  m.memory_gbs = 0;
  EXPECT_THROW(predict_speed(cfg, Layout{1, 1, 1}, bf16(), m, RowShape{}), Error);
  EXPECT_THROW(predict_speed(cfg, Layout{1, 1, 1}, bf16(), h200(), RowShape{128, 64, 0}), Error);
}

}  // namespace
}  // namespace tpbatch
