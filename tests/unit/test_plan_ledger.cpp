// `tpbatch plan`'s memory ledger against hand-computed ledgers: stories260K (the real config) and
// the published Llama-3.1 8B / 70B / 405B config.json shapes.
#include <gtest/gtest.h>

#include <filesystem>

#include "backend/dequantize_slices.h"
#include "common/error.h"
#include "model/config.h"
#include "model/llama_shard.h"
#include "plan/memory_ledger.h"
#include "test_plan_util.h"
#include "test_assets.h"

namespace tpbatch {
namespace {

using namespace plan_test;

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kDevice745 = 79993765888;  // 74.5 GiB

ModelConfig stories() { return load_model_config(test::stories_dir()); }

const ModelConfig& llama8b() {
  static const ModelConfig c = load_config_text("8b", llama31_8b());
  return c;
}
const ModelConfig& llama70b() {
  static const ModelConfig c = load_config_text("70b", llama31_70b());
  return c;
}
const ModelConfig& llama405b() {
  static const ModelConfig c = load_config_text("405b", llama31_405b());
  return c;
}

// The plan inputs of the acceptance check: 80 GB devices, bf16, default engine settings.
PlanInputs device_inputs(int world, int ranks_per_node, int64_t row_tokens = 1152) {
  PlanInputs in;
  in.world_size = world;
  in.ranks_per_node = ranks_per_node;
  in.device_memory_bytes = kDevice745;
  in.accelerator = true;
  in.weight_dtype = DType::BF16;      // norms and biases stay float32
  in.kv_dtype = DType::BF16;          // kv_cache_dtype auto on CUDA
  in.activation_dtype = DType::BF16;
  in.row_tokens = row_tokens;
  return in;
}

const LayoutLedger* find(const Plan& plan, int tensor, int pipeline) {
  for (const auto& g : plan.layouts)
    if (g.tensor == tensor && g.pipeline == pipeline) return &g;
  return nullptr;
}

// ---- stories260K: H 64, inter 172, 5 layers, 8 heads, 4 KV heads, head_dim 8, vocab 512, tied, fp32 ----
// Every rank also holds the RoPE table, head_dim / 2 floats, counted with the weights as the run's
// "weights: X MiB per rank" line counts it (LlamaShard::weight_bytes).
constexpr int64_t kStoriesRope = 4 * 4;
constexpr int64_t kLlamaRope = 64 * 4;  // head_dim 128 (8B, 70B, 405B)

TEST(PlanLedger, StoriesWeightsOnOneRankAreAllParameters) {
  const ModelConfig cfg = stories();
  // per layer: 2*64 norms + (64+2*32)*64 qkv + 64*64 o + 3*172*64 mlp = 45440; 5 layers;
  // tied embedding 512*64 once; final norm 64 -> 260032 parameters, 4 bytes each.
  EXPECT_EQ(weights_bytes_per_rank(cfg, Layout{1, 1, 1}, DType::F32), 260032 * 4 + kStoriesRope);
}

TEST(PlanLedger, StoriesWeightsAtTensorTwoAreHalfShards) {
  const ModelConfig cfg = stories();
  // per layer: 128 + (32+2*16)*64 + 64*32 + 3*86*64 = 22784; x5 + vocab 256*64 + norm 64 = 130368.
  EXPECT_EQ(weights_bytes_per_rank(cfg, Layout{2, 2, 1}, DType::F32), 130368 * 4 + kStoriesRope);
}

TEST(PlanLedger, StoriesWeightsAtTensorEightReplicateKvHeadsAndTakeLargestInterShard) {
  const ModelConfig cfg = stories();
  // 1 q head (8), 1 replicated KV head (8), inter shards 21/22 -> 22, vocab 64:
  // per layer 128 + (8+16)*64 + 64*8 + 3*22*64 = 6400; x5 + 64*64 + 64 = 36160.
  EXPECT_EQ(weights_bytes_per_rank(cfg, Layout{8, 8, 1}, DType::F32), 36160 * 4 + kStoriesRope);
}

TEST(PlanLedger, StoriesPipelineFirstStageHoldsExtraLayerAndEmbedding) {
  const ModelConfig cfg = stories();
  // stage 0: 3 layers + embedding = 3*45440 + 32768 = 169088; stage 1: 2 layers + tied LM head copy
  // + norm = 2*45440 + 32768 + 64 = 123712. The max is stage 0.
  EXPECT_EQ(weights_bytes_per_rank(cfg, Layout{2, 1, 2}, DType::F32), 169088 * 4 + kStoriesRope);
}

TEST(PlanLedger, TiedEmbeddingLastStageHoldsItsOwnVocabShard) {
  const ModelConfig cfg = stories();
  ShardPlacement last;
  last.tensor = 1;
  last.layers = layers_of_stage(cfg.num_layers, 2, 1);
  last.has_embedding = false;
  last.has_lm_head = true;
  EXPECT_EQ(shard_parameter_count(cfg, last), 2 * 45440 + 512 * 64 + 64);
}

TEST(PlanLedger, StoriesKvBytesPerTokenStopShrinkingPastKvHeads) {
  const ModelConfig cfg = stories();
  // 2 * kv heads * 8 * 4 bytes * 5 layers
  EXPECT_EQ(kv_bytes_per_token_per_rank(cfg, Layout{1, 1, 1}, DType::F32), 1280);
  EXPECT_EQ(kv_bytes_per_token_per_rank(cfg, Layout{2, 2, 1}, DType::F32), 640);
  EXPECT_EQ(kv_bytes_per_token_per_rank(cfg, Layout{4, 4, 1}, DType::F32), 320);
  EXPECT_EQ(kv_bytes_per_token_per_rank(cfg, Layout{8, 8, 1}, DType::F32), 320);
}

TEST(PlanLedger, StoriesKvBytesPerTokenCountTheLargestStage) {
  const ModelConfig cfg = stories();
  EXPECT_EQ(kv_bytes_per_token_per_rank(cfg, Layout{2, 1, 2}, DType::F32), 2 * 4 * 8 * 4 * 3);
}

TEST(PlanLedger, StoriesReservedBytesFollowTheDocumentedEstimate) {
  const ModelConfig cfg = stories();
  PlanInputs in;  // max_batch_tokens 4096, max_seqs 64, no accelerator
  // per token floats: 3*64 + (64 + 2*32) + 64 + 3*172 = 900; x 2 x 4096 x 4 B; logits 64*512*4.
  EXPECT_EQ(reserved_bytes_per_rank(cfg, Layout{1, 1, 1}, in), 2 * 4096 * 900 * 4 + 64 * 512 * 4);
  in.accelerator = true;
  EXPECT_EQ(reserved_bytes_per_rank(cfg, Layout{1, 1, 1}, in), 2 * 4096 * 900 * 4 + 64 * 512 * 4 + kGiB);
}

TEST(PlanLedger, QuantizedCheckpointsOnCudaReserveTheDequantizeScratchOfTheLargestProjection) {
  const ModelConfig dense = stories();
  ModelConfig fp8 = dense;
  fp8.quantization.method = "fp8";
  fp8.quantization.granularity = ScaleGranularity::Block;
  fp8.quantization.block_rows = fp8.quantization.block_cols = 128;
  PlanInputs in;
  in.accelerator = true;
  auto extra = [&](Layout l) { return reserved_bytes_per_rank(fp8, l, in) - reserved_bytes_per_rank(dense, l, in); };
  // gate|up is the largest: 2 x 172 rows of 64 columns, then 2 x 86 at TP=2, in bf16.
  EXPECT_EQ(extra(Layout{1, 1, 1}), 2 * 172 * 64 * 2);
  EXPECT_EQ(extra(Layout{2, 2, 1}), 2 * 86 * 64 * 2);
  in.accelerator = false;  // the CPU backend dequantizes into its own per-thread slices
  EXPECT_EQ(extra(Layout{1, 1, 1}), 0);
  // Bounded: Llama-8B's gate|up (2 x 14336 rows of 4096) goes in slices of 8192 rows, 64 MiB.
  EXPECT_EQ(dequantize_slice_rows(2 * 14336, 4096), 8192);
  EXPECT_EQ(dequantize_scratch_bytes(2 * 14336, 4096), int64_t{64} << 20);
}

TEST(PlanLedger, StoriesKvTokensAndRowsInOneGiB) {
  const ModelConfig cfg = stories();
  PlanInputs in;
  in.world_size = 1;
  in.ranks_per_node = 1;
  in.device_memory_bytes = kGiB;
  in.weight_dtype = DType::F32;
  in.kv_dtype = DType::F32;
  in.row_tokens = 512;
  const LayoutLedger g = ledger_of(cfg, Layout{1, 1, 1}, in);
  // floor(1 GiB * 0.9) - 1040144 weights (with the RoPE table) - 29622272 reserved = 935705225 bytes;
  // / 1280 per token.
  EXPECT_EQ(g.kv_budget_bytes_per_rank, 935705225);
  EXPECT_EQ(g.kv_tokens_per_rank, 731019);
  EXPECT_EQ(g.concurrent_rows, 1427);
  EXPECT_TRUE(g.fits);
}

TEST(PlanLedger, StoriesLegalLayoutsOfEightRanks) {
  const ModelConfig cfg = stories();
  // TP in {1,2,4,8} (8 heads, 4 KV heads), PP <= 5 layers, TP*PP | 8.
  const auto layouts = legal_layouts(cfg, 8, 8);
  std::vector<std::pair<int, int>> got;
  for (const auto& l : layouts) got.emplace_back(l.tensor, l.pipeline);
  const std::vector<std::pair<int, int>> want = {{1, 1}, {1, 2}, {1, 4}, {2, 1}, {2, 2},
                                                 {2, 4}, {4, 1}, {4, 2}, {8, 1}};
  EXPECT_EQ(got, want);
}

TEST(PlanLedger, TensorGroupsMustStayWithinANode) {
  const ModelConfig cfg = stories();
  for (const auto& l : legal_layouts(cfg, 8, 2)) EXPECT_LE(l.tensor, 2);
  EXPECT_TRUE(tensor_group_fits_node(8, 4, 4));
  EXPECT_FALSE(tensor_group_fits_node(12, 4, 6));  // ranks 4..7 straddle nodes 0..5 and 6..11
  EXPECT_FALSE(tensor_group_fits_node(16, 16, 8));
}

TEST(PlanLedger, DtypeNames) {
  EXPECT_EQ(dtype_of_name("bfloat16", "dtype"), DType::BF16);
  EXPECT_EQ(dtype_of_name("float32", "dtype"), DType::F32);
  EXPECT_EQ(dtype_of_name("float16", "dtype"), DType::F16);
  EXPECT_THROW(dtype_of_name("int8", "dtype"), Error);
}

TEST(PlanLedger, SixteenBitWeightsKeepNormsInFloat32) {
  const ModelConfig cfg = stories();
  // 260032 parameters, of which 5*2*64 + 64 = 704 are norms (4 bytes each), the rest 2 bytes.
  EXPECT_EQ(weights_bytes_per_rank(cfg, Layout{1, 1, 1}, DType::BF16), (260032 - 704) * 2 + 704 * 4 + kStoriesRope);
  EXPECT_EQ(weights_bytes_per_rank(cfg, Layout{1, 1, 1}, DType::F16), (260032 - 704) * 2 + 704 * 4 + kStoriesRope);
  EXPECT_EQ(kv_bytes_per_token_per_rank(cfg, Layout{1, 1, 1}, DType::BF16), 640);
}

// ---- Llama-3.1-8B: 8,030,261,248 parameters ----

TEST(PlanLedger, Llama8BWeightsOnOneRankAreThePublishedParameterCount) {
  // bf16, with the 32*2*4096 + 4096 = 266240 norm weights kept in float32 (2 bytes more each).
  EXPECT_EQ(weights_bytes_per_rank(llama8b(), Layout{1, 1, 1}, DType::BF16), int64_t{8030261248} * 2 + 266240 * 2 + kLlamaRope);
}

TEST(PlanLedger, Llama8BKvCacheIs128KiBPerToken) {
  EXPECT_EQ(kv_bytes_per_token_per_rank(llama8b(), Layout{1, 1, 1}, DType::BF16), 128 * 1024);
  EXPECT_EQ(kv_bytes_per_token_per_rank(llama8b(), Layout{8, 8, 1}, DType::BF16), 16 * 1024);
}

// ---- Llama-3.1-70B: 70,553,706,496 parameters; acceptance numbers at 74.5 GiB ----

TEST(PlanLedger, Llama70BWeightsPerRankAreTotalOverTensor) {
  const ModelConfig& c = llama70b();
  // bf16; the 80*2*8192 + 8192 = 1318912 norm weights (replicated on every rank) are float32.
  const int64_t norms = 1318912 * 2 + kLlamaRope;
  EXPECT_EQ(weights_bytes_per_rank(c, Layout{1, 1, 1}, DType::BF16), int64_t{70553706496} * 2 + norms);
  // TP=2: per layer 2*8192 + (4096+2*512)*8192 + 8192*4096 + 3*14336*8192 = 427835392; x80
  // + 2 vocab shards 64128*8192 + norm.
  EXPECT_EQ(weights_bytes_per_rank(c, Layout{2, 2, 1}, DType::BF16), int64_t{35277512704} * 2 + norms);
  EXPECT_EQ(weights_bytes_per_rank(c, Layout{4, 4, 1}, DType::BF16), int64_t{17639415808} * 2 + norms);
  EXPECT_EQ(weights_bytes_per_rank(c, Layout{8, 8, 1}, DType::BF16), int64_t{8820367360} * 2 + norms);
  // TP=16: one KV head replicated per rank, so slightly more than a sixteenth.
  EXPECT_EQ(weights_bytes_per_rank(c, Layout{16, 16, 1}, DType::BF16), int64_t{4494729216} * 2 + norms);
  for (int t : {1, 2, 4, 8, 16})
    EXPECT_NEAR(static_cast<double>(weights_bytes_per_rank(c, Layout{t, t, 1}, DType::BF16)), 141.1e9 / t, 0.03 * 141.1e9 / t);
}

TEST(PlanLedger, Llama70BKvPerTokenIs80KiBAtTp4And40KiBAtTp8And16) {
  const Plan plan = make_plan(llama70b(), device_inputs(16, 16));
  ASSERT_NE(find(plan, 4, 1), nullptr);
  ASSERT_NE(find(plan, 8, 1), nullptr);
  ASSERT_NE(find(plan, 16, 1), nullptr);
  EXPECT_EQ(find(plan, 4, 1)->kv_bytes_per_token_per_rank, 80 * 1024);
  EXPECT_EQ(find(plan, 8, 1)->kv_bytes_per_token_per_rank, 40 * 1024);
  EXPECT_EQ(find(plan, 16, 1)->kv_bytes_per_token_per_rank, 40 * 1024);
}

TEST(PlanLedger, Llama70BDoesNotFitAtTp2OrLessAndFitsAtTp4And8) {
  for (int world : {8, 16}) {
    const Plan plan = make_plan(llama70b(), device_inputs(world, world));
    EXPECT_FALSE(find(plan, 1, 1)->fits) << world;
    EXPECT_FALSE(find(plan, 2, 1)->fits) << world;
    EXPECT_TRUE(find(plan, 4, 1)->fits) << world;
    EXPECT_TRUE(find(plan, 8, 1)->fits) << world;
  }
}

TEST(PlanLedger, NoLayoutFitsOn16GiBFor405B) {
  PlanInputs in = device_inputs(8, 8);
  in.device_memory_bytes = 16 * kGiB;
  const Plan plan = make_plan(llama405b(), in);
  for (const auto& g : plan.layouts) {
    EXPECT_EQ(g.kv_tokens_per_rank, 0);
    EXPECT_FALSE(g.fits);
  }
}

TEST(PlanLedger, Llama70BKvTokensAtTp4MatchHandLedger) {
  const Plan plan = make_plan(llama70b(), device_inputs(8, 8));
  const LayoutLedger& g = *find(plan, 4, 1);
  // reserved: 2*4096*4*(3*8192 + (2048+2*256) + 2048 + 3*7168) + 64*32064*4 + 1 GiB = 2742894592
  EXPECT_EQ(g.reserved_bytes_per_rank, 2742894592);
  // floor(74.5 GiB * 0.9) - (35278831616 + 2637824 float32 norms + 256 RoPE) - 2742894592
  // = 33970025011; / 81920 per token.
  EXPECT_EQ(g.kv_budget_bytes_per_rank, 33970025011);
  EXPECT_EQ(g.kv_tokens_per_rank, 414673);
  EXPECT_EQ(g.concurrent_rows, 414673 / 1152);
  EXPECT_EQ(g.data, 2);
}

TEST(PlanLedger, AllreduceTimeFollowsAlphaBetaModel) {
  const ModelConfig& c = llama70b();
  PlanInputs in = device_inputs(8, 8);  // alpha 8 us, B 150 GB/s, max_seqs 64
  // S = 64 * 8192 * 2 = 1048576 bytes; TP=8: 2 * 80 * (8 + 1.75 * 1048576 / 150000) us
  EXPECT_NEAR(allreduce_us_per_decode_step(c, Layout{8, 8, 1}, in), 2 * 80 * (8.0 + 1.75 * 1048576 / 150000.0), 1e-6);
  EXPECT_EQ(allreduce_us_per_decode_step(c, Layout{8, 1, 1}, in), 0.0);
  // PP=2: the largest stage has 40 layers.
  EXPECT_NEAR(allreduce_us_per_decode_step(c, Layout{8, 4, 2}, in), 2 * 40 * (8.0 + 1.5 * 1048576 / 150000.0), 1e-6);
}

// ---- Llama-3.1-405B ----

TEST(PlanLedger, Llama405BAtTp8NeedsTwoPipelineStagesOn80GBDevices) {
  const ModelConfig& c = llama405b();
  // TP=8 per layer: 2*16384 + (2048+2*128)*16384 + 16384*2048 + 3*6656*16384 = 398491648
  // (norms, 2*16384 per layer + the final 16384, in float32: 2 bytes more each)
  EXPECT_EQ(weights_bytes_per_rank(c, Layout{8, 8, 1}, DType::BF16),
            (126 * int64_t{398491648} + 2 * 16032 * 16384 + 16384) * 2 + (126 * 2 * 16384 + 16384) * 2 + kLlamaRope);
  // PP=2: 63 layers per stage; the last stage (LM head + norm) is the larger.
  EXPECT_EQ(weights_bytes_per_rank(c, Layout{16, 8, 2}, DType::BF16),
            (63 * int64_t{398491648} + 16032 * 16384 + 16384) * 2 + (63 * 2 * 16384 + 16384) * 2 + kLlamaRope);
  EXPECT_EQ(kv_bytes_per_token_per_rank(c, Layout{16, 8, 2}, DType::BF16), 2 * 128 * 2 * 63);

  const Plan plan = make_plan(c, device_inputs(16, 8));
  EXPECT_FALSE(find(plan, 8, 1)->fits);
  EXPECT_TRUE(find(plan, 8, 2)->fits);
}

}  // namespace
}  // namespace tpbatch
