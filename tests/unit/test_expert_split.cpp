// parallel.experts: the job key, which experts each rank owns, and the layouts
// the expert split refuses.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include <random>
#include <vector>

#include "backend/backend.h"
#include "comm/one_rank_communicator.h"
#include "common/error.h"
#include "job/job_spec.h"
#include "model/config.h"
#include "model/llama_shard.h"
#include "model/moe.h"
#include "model/safetensors.h"
#include "model/shard_bytes.h"
#include "model/shard_placement.h"
#include "plan/memory_ledger.h"
#include "plan/plan_command.h"
#include "tools/make_model.h"

namespace fs = std::filesystem;

namespace tpbatch {
namespace {

ModelConfig moe_model(int64_t experts) {
  const nlohmann::json c{{"architectures", {"MixtralForCausalLM"}},
                         {"hidden_size", 64},
                         {"intermediate_size", 96},
                         {"num_hidden_layers", 2},
                         {"num_attention_heads", 4},
                         {"num_key_value_heads", 2},
                         {"vocab_size", 512},
                         {"max_position_embeddings", 512},
                         {"num_local_experts", experts},
                         {"num_experts_per_tok", 2}};
  return parse_model_config(c.dump(), "", "m");
}

ShardPlacement place(int tensor, int rank, ExpertSplit split) {
  ShardPlacement p;
  p.tensor = tensor, p.tp_rank = rank, p.layers = Range{0, 2}, p.experts = split;
  return p;
}

TEST(ExpertSplit, EachRankOwnsAContiguousBlockOfWholeExperts) {
  const ModelConfig m = moe_model(8);
  const int64_t want[4][2] = {{0, 2}, {2, 4}, {4, 6}, {6, 8}};
  for (int r = 0; r < 4; ++r) {
    const Range e = experts_of_rank(m, place(4, r, ExpertSplit::kExpert));
    EXPECT_EQ(e.begin, want[r][0]) << "rank " << r;
    EXPECT_EQ(e.end, want[r][1]) << "rank " << r;
    const Range w = expert_inter_of_rank(m, place(4, r, ExpertSplit::kExpert));  // unsplit
    EXPECT_EQ(w.begin, 0);
    EXPECT_EQ(w.end, 96);
  }
  // TP=2: halves; TP=1: everything.
  EXPECT_EQ(experts_of_rank(m, place(2, 1, ExpertSplit::kExpert)).begin, 4);
  EXPECT_EQ(experts_of_rank(m, place(1, 0, ExpertSplit::kExpert)).size(), 8);
}

TEST(ExpertSplit, TensorSplitKeepsEveryExpertAndSlicesItsWidth) {
  const ModelConfig m = moe_model(8);
  for (int r = 0; r < 4; ++r) {
    const Range e = experts_of_rank(m, place(4, r, ExpertSplit::kTensor));
    EXPECT_EQ(e.begin, 0);
    EXPECT_EQ(e.end, 8);
    const Range w = expert_inter_of_rank(m, place(4, r, ExpertSplit::kTensor));
    EXPECT_EQ(w.begin, 24 * r);
    EXPECT_EQ(w.size(), 24);
  }
}

TEST(ExpertSplit, ShardPlacementCarriesTheSplit) {
  const ModelConfig m = moe_model(8);
  const ShardPlacement p = shard_placement(m, /*tensor=*/2, /*pipeline=*/2, 1, 1, ExpertSplit::kExpert);
  EXPECT_EQ(p.experts, ExpertSplit::kExpert);
  EXPECT_EQ(p.tensor, 2);
  EXPECT_EQ(p.tp_rank, 1);
  EXPECT_EQ(p.layers.begin, 1);
  EXPECT_FALSE(p.has_embedding);
  EXPECT_TRUE(p.has_lm_head);
}

TEST(ExpertSplit, ProblemsNameTheKey) {
  EXPECT_EQ(expert_split_problem(moe_model(8), ExpertSplit::kExpert, 2), "");
  EXPECT_EQ(expert_split_problem(moe_model(8), ExpertSplit::kExpert, 8), "");
  EXPECT_EQ(expert_split_problem(moe_model(6), ExpertSplit::kTensor, 4), "");  // tensor: any degree the heads allow
  const std::string uneven = expert_split_problem(moe_model(6), ExpertSplit::kExpert, 4);
  EXPECT_NE(uneven.find("parallel.experts"), std::string::npos) << uneven;
  EXPECT_NE(uneven.find("6 experts are not divisible by parallel.tensor=4"), std::string::npos) << uneven;
  ModelConfig dense = moe_model(8);
  dense.num_experts = 0;
  dense.architecture = "LlamaForCausalLM";
  const std::string d = expert_split_problem(dense, ExpertSplit::kExpert, 2);
  EXPECT_NE(d.find("parallel.experts"), std::string::npos) << d;
  EXPECT_NE(d.find("LlamaForCausalLM has no experts"), std::string::npos) << d;
  EXPECT_EQ(expert_split_problem(dense, ExpertSplit::kTensor, 2), "");
}

class ExpertSplitKey : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tpbatch_experts_key_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "model");
    std::ofstream(dir_ / "p.jsonl") << "{\"prompt\": \"hi\"}\n";
    base_ = "model: " + (dir_ / "model").string() + "\ninput:\n  path: " + (dir_ / "p.jsonl").string() + "\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
  std::string base_;
};

TEST_F(ExpertSplitKey, DefaultTensorAbsentFromTheEffectiveYaml) {
  const JobSpec j = parse_job(base_, {}, dir_);
  EXPECT_EQ(j.parallel.experts, ExpertSplit::kTensor);
  EXPECT_EQ(j.effective_yaml.find("  experts:"), std::string::npos) << j.effective_yaml;  // older results still resume
  const JobSpec t = parse_job(base_ + "parallel:\n  experts: tensor\n", {}, dir_);
  EXPECT_EQ(t.effective_yaml, j.effective_yaml);
}

TEST_F(ExpertSplitKey, ExpertIsReadSetAndEmittedInTheParallelSection) {
  const JobSpec j = parse_job(base_ + "parallel:\n  tensor: 2\n  experts: expert\n", {}, dir_);
  EXPECT_EQ(j.parallel.experts, ExpertSplit::kExpert);
  EXPECT_NE(j.effective_yaml.find("  ranks_per_node: 0\n  experts: expert\n"), std::string::npos) << j.effective_yaml;
  EXPECT_EQ(parse_job(j.effective_yaml, {}, dir_).effective_yaml, j.effective_yaml);  // round trip
  EXPECT_EQ(parse_job(base_, {"parallel.experts=expert"}, dir_).parallel.experts, ExpertSplit::kExpert);
}

TEST_F(ExpertSplitKey, UnknownChoiceNamesTheKeyAndTheChoices) {
  try {
    parse_job(base_ + "parallel:\n  experts: round_robin\n", {}, dir_);
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    const std::string m = e.what();
    EXPECT_NE(m.find("parallel.experts"), std::string::npos) << m;
    EXPECT_NE(m.find("tensor"), std::string::npos) << m;
    EXPECT_NE(m.find("expert"), std::string::npos) << m;
  }
}

// Generated Mixtral (every layer sparse) and Qwen3-MoE (layer 1 dense) models of 4 experts.
class ExpertShards : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = fs::temp_directory_path() / ("tpbatch_expert_shards_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    MakeModelOptions mixtral;
    mixtral.architecture = "MixtralForCausalLM";
    mixtral.num_layers = 2;
    mixtral.intermediate_size = 40;
    mixtral.seed = 7;
    make_model(root_ / "mixtral", mixtral);
    MakeModelOptions qwen = mixtral;
    qwen.architecture = "Qwen3MoeForCausalLM";
    qwen.moe_intermediate_size = 24;
    qwen.mlp_only_layers = {1};
    qwen.norm_topk_prob = false;
    make_model(root_ / "qwen3moe", qwen);
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }
  static inline fs::path root_;
};

ShardPlacement whole_layers(const ModelConfig& c, int tensor, int rank, ExpertSplit split) {
  return shard_placement(c, tensor, /*pipeline=*/1, 0, rank, split);
}

TEST_F(ExpertShards, EachRankLoadsOnlyItsWholeExpertsAndThePlanCountsThem) {
  auto be = make_cpu_backend();
  for (const char* name : {"mixtral", "qwen3moe"}) {
    const ModelConfig c = load_model_config(root_ / name);
    const WeightStore ws = WeightStore::open(root_ / name);
    for (int tensor : {1, 2, 4})
      for (int r = 0; r < tensor; ++r)
        for (DType wt : {DType::F32, DType::BF16}) {
          const ShardPlacement p = whole_layers(c, tensor, r, ExpertSplit::kExpert);
          const LlamaShard s = load_llama_shard(c, ws, p, *be, wt);
          EXPECT_EQ(s.expert_range.begin, r * 4 / tensor);
          EXPECT_EQ(s.expert_range.size(), 4 / tensor);
          EXPECT_EQ(s.expert_inter, c.expert_intermediate_size);  // unsplit
          for (int64_t l = 0; l < c.num_layers; ++l) {
            const LayerShard& L = s.layers[size_t(l)];
            if (!c.is_moe_layer(l)) continue;
            ASSERT_EQ(L.expert_gu.size(), size_t(4 / tensor)) << name;
            EXPECT_EQ(L.expert_gu[0].values.count(), size_t(2 * c.expert_intermediate_size * c.hidden_size));
            EXPECT_EQ(L.expert_down[0].values.count(), size_t(c.hidden_size * c.expert_intermediate_size));
            EXPECT_EQ(L.router.values.count(), size_t(4 * c.hidden_size));  // replicated
          }
          EXPECT_EQ(static_cast<int64_t>(s.weight_bytes()), shard_weight_bytes(c, p, wt))
              << name << " TP " << tensor << " rank " << r;
        }
  }
}

// The MoE block's outputs of every rank sum to the unsharded block's output, under both splits:
// what the one allreduce per layer relies on.
TEST_F(ExpertShards, RanksPartialOutputsSumToTheWholeBlock) {
  auto be = make_cpu_backend(CpuBackendOptions{true});  // checked: no host access outside the backend
  for (const char* name : {"mixtral", "qwen3moe"}) {
    const ModelConfig c = load_model_config(root_ / name);
    const WeightStore ws = WeightStore::open(root_ / name);
    const int64_t H = c.hidden_size, rows = 13;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> hx(size_t(rows * H));
    for (float& v : hx) v = nd(rng);
    Buffer h = be->alloc(hx.size(), DType::F32), out = be->alloc(hx.size(), DType::F32);
    be->upload(h.view(), hx.data(), hx.size() * 4);
    auto block_output = [&](int tensor, int rank, ExpertSplit split) {
      const LlamaShard s = load_llama_shard(c, ws, whole_layers(c, tensor, rank, split), *be, DType::F32);
      MoeBlock block;
      OneRankCommunicator lone(*be);  // each rank's partial output, before the allreduce
      block.forward(*be, lone, s, s.layers[0], h.view(), rows, out.view());
      std::vector<float> y(hx.size());
      be->download(out.view(), y.data(), y.size() * 4);
      return y;
    };
    const std::vector<float> whole = block_output(1, 0, ExpertSplit::kTensor);
    for (ExpertSplit split : {ExpertSplit::kTensor, ExpertSplit::kExpert})
      for (int tensor : {2, 4}) {
        std::vector<float> sum(hx.size(), 0.0f);
        for (int r = 0; r < tensor; ++r) {
          const std::vector<float> part = block_output(tensor, r, split);
          for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
        }
        double worst = 0;
        for (size_t i = 0; i < sum.size(); ++i) worst = std::max(worst, double(std::fabs(sum[i] - whole[i])));
        EXPECT_LT(worst, 1e-5) << name << (split == ExpertSplit::kExpert ? " expert" : " tensor") << " TP " << tensor;
      }
    EXPECT_EQ(block_output(1, 0, ExpertSplit::kExpert), whole);  // one rank: the same computation
  }
}

TEST(ExpertSplit, ScratchBoundsTheSlotsByTheExpertsHeld) {
  const ModelConfig m = moe_model(8);  // H 64, expert width 96, top-2
  const MoeScratch t = moe_scratch(m, place(4, 1, ExpertSplit::kTensor), 10);
  EXPECT_EQ(t.logits_f32, 80);
  EXPECT_EQ(t.gathered, 20 * 64);
  EXPECT_EQ(t.gate_up, 20 * 2 * 24);
  EXPECT_EQ(t.act, 20 * 24);
  EXPECT_EQ(t.out, 21 * 64);
  const MoeScratch e = moe_scratch(m, place(4, 1, ExpertSplit::kExpert), 10);  // 2 experts held: 2 slots a token
  EXPECT_EQ(e.gathered, 20 * 64);
  EXPECT_EQ(e.gate_up, 20 * 2 * 96);
  const MoeScratch e8 = moe_scratch(m, place(8, 1, ExpertSplit::kExpert), 10);  // 1 expert held: 1 slot
  EXPECT_EQ(e8.gathered, 10 * 64);
  EXPECT_EQ(e8.gate_up, 10 * 2 * 96);
  EXPECT_EQ(e8.bytes(DType::BF16), 80 * 4 + (10 * 64 + 10 * 192 + 10 * 96 + 11 * 64) * 2);
}

// `tpbatch plan`: the MoE block's scratch in the reserved bytes, the experts' bytes per rank, and
// both splits side by side.
TEST(ExpertSplitPlan, ReservedBytesCountTheMoeScratchOfTheSplit) {
  const ModelConfig moe = moe_model(8);  // H 64, 8 experts of width 96, top-2
  ModelConfig dense = moe;
  dense.num_experts = 0;
  PlanInputs in;  // max_batch_tokens 4096, CPU
  // TP=2, tensor: 8192 slots; floats 4096 x 8 logits + 8192 x 64 gathered + 8192 x 96 gate/up
  // + 8192 x 48 act + 8193 x 64 outputs = 2261056, x 4 B.
  EXPECT_EQ(moe_scratch_bytes_per_rank(moe, Layout{2, 2, 1}, in), 9044224);
  // Host routing: 4096 x 8 x 4 + 8192 x 36 + 9 x 8.
  const int64_t host = 131072 + 294912 + 72;
  EXPECT_EQ(reserved_bytes_per_rank(moe, Layout{2, 2, 1}, in) - reserved_bytes_per_rank(dense, Layout{2, 2, 1}, in),
            2 * 9044224 + host);
  in.accelerator = true;  // the routing stays on the host
  EXPECT_EQ(reserved_bytes_per_rank(moe, Layout{2, 2, 1}, in) - reserved_bytes_per_rank(dense, Layout{2, 2, 1}, in),
            2 * 9044224);
  // expert: whole experts of width 96: gate/up 8192 x 192, act 8192 x 96.
  in.experts = ExpertSplit::kExpert;
  EXPECT_EQ(moe_scratch_bytes_per_rank(moe, Layout{2, 2, 1}, in), (32768 + 524288 + 1572864 + 786432 + 524352) * 4);
  EXPECT_EQ(moe_scratch_bytes_per_rank(dense, Layout{2, 2, 1}, in), 0);
}

TEST(ExpertSplitPlan, BothSplitsSideBySideAndTheJobsSplitDecidesTheLayouts) {
  const ModelConfig m = moe_model(6);  // 4 heads: TP 1, 2, 4; 6 experts: expert only at TP 1 and 2
  PlanInputs in;
  in.world_size = 4;
  in.ranks_per_node = 4;
  in.device_memory_bytes = int64_t{1} << 30;
  in.weight_dtype = DType::F32;
  in.row_tokens = 256;
  const auto splits = compare_expert_splits(m, in);
  ASSERT_FALSE(splits.empty());
  bool saw_tp4 = false;
  for (const auto& c : splits) {
    EXPECT_TRUE(c.tensor_split.legal);
    EXPECT_EQ(c.expert_split.legal, c.tensor != 4) << "TP " << c.tensor;
    if (c.tensor == 4) saw_tp4 = true;
    if (c.tensor != 2 || c.pipeline != 1) continue;
    // 2 layers x (router 6 x 64 + experts x 3 x width x 64): 6 halves or 3 wholes, the same bytes.
    const int64_t experts = 2 * (6 * 64 + 6 * 3 * 48 * 64) * 4;
    EXPECT_EQ(c.tensor_split.ledger.expert_weights_bytes_per_rank, experts);
    EXPECT_EQ(c.expert_split.ledger.expert_weights_bytes_per_rank, 2 * (6 * 64 + 3 * 3 * 96 * 64) * 4);
    EXPECT_EQ(c.tensor_split.ledger.weights_bytes_per_rank, c.expert_split.ledger.weights_bytes_per_rank);
    EXPECT_GT(c.expert_split.ledger.reserved_bytes_per_rank, c.tensor_split.ledger.reserved_bytes_per_rank);
  }
  EXPECT_TRUE(saw_tp4);
  ModelConfig dense = m;
  dense.num_experts = 0;
  EXPECT_TRUE(compare_expert_splits(dense, in).empty());

  // The plan itself follows the job's split: under expert, no TP=4 layout.
  const Plan tensor_plan = make_plan(m, in);
  in.experts = ExpertSplit::kExpert;
  const Plan expert_plan = make_plan(m, in);
  auto has_tp4 = [](const Plan& p) {
    for (const auto& g : p.layouts)
      if (g.tensor == 4) return true;
    return false;
  };
  EXPECT_TRUE(has_tp4(tensor_plan));
  EXPECT_FALSE(has_tp4(expert_plan));
  std::ostringstream text;
  print_plan_text(expert_plan, m, "m", "float32", text);
  EXPECT_NE(text.str().find("parallel.experts: expert, whole experts"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("   4    1  expert  n/a: 6 experts not divisible by TP"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("   2    1  expert "), std::string::npos) << text.str();
  const std::string j = plan_json(expert_plan, m, "m", "float32");
  EXPECT_NE(j.find("\"expert_splits\""), std::string::npos);
  EXPECT_NE(j.find("\"parallel_experts\": \"expert\""), std::string::npos);
}

}  // namespace
}  // namespace tpbatch
