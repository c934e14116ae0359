#include "plan/speed_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace tpbatch {

bool wants_speed(const SpeedRequest& r) {
  return r.calibrate || r.preset != nullptr || r.memory_gbs > 0 || r.gemm_tflops > 0;
}

std::vector<GemmRate> parse_gemm_rates(const std::string& text) {
  std::vector<GemmRate> out;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const size_t colon = item.find(':');
    char* rest = nullptr;
    GemmRate g;
    bool ok = colon != std::string::npos;
    if (ok) {
      const std::string rows = item.substr(0, colon), rate = item.substr(colon + 1);
      g.rows = std::strtod(rows.c_str(), &rest);
      ok = !rows.empty() && *rest == '\0';
      g.tflops = std::strtod(rate.c_str(), &rest);
      ok = ok && !rate.empty() && *rest == '\0';
    }
    if (!ok || !(g.rows > 0) || !(g.tflops > 0) || !std::isfinite(g.rows) || !std::isfinite(g.tflops) ||
        (!out.empty() && g.rows <= out.back().rows))
      throw JobError("--gemm-rates: '" + item + "' is not ROWS:TFLOPS with both positive and rows ascending (e.g. "
                     "1:0.005,8:0.03,32:0.05)");
    out.push_back(g);
    begin = end + 1;
  }
  return out;
}

namespace {

// The node's memory and GEMM rates, its attention rates and overheads, and where each comes from.
void pick_node_figures(const SpeedRequest& r, const std::optional<Calibration>& cal, const PlanInputs& in,
                       SpeedReport& rep) {
  // A flag, else the measurement, else the preset's figure, else the default.
  auto pick = [&](double flag, double measured, double preset, double fallback, std::string& source) {
    if (flag > 0) { source = "given"; return flag; }
    if (measured > 0) { source = "measured"; return measured; }
    if (preset > 0) { source = "preset " + r.preset->name; return preset; }
    source = "default";
    return fallback;
  };
  rep.node.memory_gbs = pick(r.memory_gbs, cal ? cal->memory_gbs : 0.0, r.preset ? r.preset->memory_gbs() : 0.0,
                             in.accelerator ? default_accelerator_preset().memory_gbs() : kCpuMemoryGBs, rep.memory_source);
  rep.node.gemm_tflops = pick(r.gemm_tflops, cal ? cal->gemm_tflops : 0.0, r.preset ? r.preset->gemm_tflops() : 0.0,
                              in.accelerator ? default_accelerator_preset().gemm_tflops() : kCpuGemmTflops,
                              rep.gemm_source);
  rep.node.gemm_half_rows = r.gemm_half_rows >= 0 ? r.gemm_half_rows
                            : (cal && r.gemm_tflops <= 0) ? cal->gemm_half_rows : 0.0;
  // The measured R(m) points belong with the measured peak (a given --gemm-tflops drops them, as it
  // drops the measured m_half); attention rates likewise with a given --memory-gbs or --gemm-tflops.
  const bool own_rates = cal && r.gemm_tflops <= 0;
  if (!r.gemm_rates.empty()) {
    rep.node.gemm_rates = r.gemm_rates;
    rep.gemm_rates_source = "given";
  } else if (own_rates && !cal->gemm_rates.empty()) {
    rep.node.gemm_rates = cal->gemm_rates;
    rep.gemm_rates_source = "measured";
  } else {
    rep.gemm_rates_source = "none";
  }
  // A pair of figures: given by flags (a negative flag is "not given"), else measured when the
  // calibration's own rates are in use, else none (0).
  auto pick_pair = [](double given_a, double given_b, bool measured, double cal_a, double cal_b, double& a, double& b) {
    if (given_a >= 0 || given_b >= 0) {
      a = std::max(0.0, given_a), b = std::max(0.0, given_b);
      return "given";
    }
    if (measured) {
      a = cal_a, b = cal_b;
      return "measured";
    }
    return "none";
  };
  const bool own_measured = own_rates && r.memory_gbs <= 0;
  rep.attention_source =
      pick_pair(r.attention_tflops, r.prefill_attention_tflops, own_measured && cal->attention_tflops > 0,
           own_measured ? cal->attention_tflops : 0.0, own_measured ? cal->prefill_attention_tflops : 0.0,
           rep.node.attention_tflops, rep.node.prefill_attention_tflops);
  rep.overhead_source =
      pick_pair(r.layer_overhead_us, r.logits_overhead_us, own_measured && cal->layer_overhead_us > 0,
           own_measured ? cal->layer_overhead_us : 0.0, own_measured ? cal->logits_overhead_us : 0.0,
           rep.node.layer_overhead_us, rep.node.logits_overhead_us);
}

// One rank's share of the node, and how much faster a phase runs while some ranks wait.
void share_node_among_ranks(const SpeedRequest& r, const std::optional<Calibration>& cal, const PlanInputs& in,
                            SpeedReport& rep) {
  // CPU ranks of one node share its memory bandwidth and cores; an accelerator is one rank's own.
  rep.ranks_sharing = in.accelerator ? 1 : std::max(1, std::min(in.ranks_per_node, in.world_size));
  rep.rank.memory_gbs /= rep.ranks_sharing;
  rep.rank.gemm_tflops /= rep.ranks_sharing;
  for (GemmRate& g : rep.rank.gemm_rates) g.tflops /= rep.ranks_sharing;
  rep.rank.attention_tflops /= rep.ranks_sharing;
  rep.rank.prefill_attention_tflops /= rep.ranks_sharing;
  rep.rank.layer_overhead_us *= rep.ranks_sharing;  // times: a rank's share of the node takes longer
  rep.rank.logits_overhead_us *= rep.ranks_sharing;
  // More ranks x threads than cores (measured: the calibration knows both; the job on one node, so
  // the stages of a pipeline share its cores): a phase where some ranks wait runs faster.
  if (r.oversubscription >= 1)
    rep.rank.oversubscription = r.oversubscription;
  else if (!in.accelerator && cal && rep.ranks_sharing >= in.world_size)
    rep.rank.oversubscription =
        std::max(1.0, static_cast<double>(rep.ranks_sharing) * cal->gemm_threads / std::max(1, cal->cores));
}

}  // namespace

SpeedReport make_speed_report(const SpeedRequest& r, const std::optional<Calibration>& cal,
                              const std::string& allreduce_source, const Plan& plan, const ModelConfig& config,
                              int64_t max_new_tokens) {
  if (r.prompt_tokens < 0 || r.new_tokens < 0 || r.rows < 0)
    throw JobError("--prompt-tokens, --new-tokens and --rows must be at least 1");
  const PlanInputs& in = plan.inputs;
  SpeedReport rep;
  rep.calibration = cal;
  pick_node_figures(r, cal, in, rep);
  rep.node.alpha_us = in.alpha_us;
  rep.node.allreduce_gbs = in.bandwidth_gbs;
  rep.node.internode_alpha_us = in.internode_alpha_us;
  rep.node.internode_gbs = in.internode_gbs;
  rep.node.ranks_per_node = in.ranks_per_node;
  rep.allreduce_source = allreduce_source;
  rep.rank = rep.node;
  share_node_among_ranks(r, cal, in, rep);

  const int64_t new_tokens = r.new_tokens > 0 ? r.new_tokens : std::max<int64_t>(1, max_new_tokens);
  const int64_t prompt = r.prompt_tokens > 0 ? r.prompt_tokens : std::max<int64_t>(1, in.row_tokens - new_tokens);
  const CostDtypes dtypes{in.weight_dtype, in.kv_dtype, in.activation_dtype};
  for (const auto& g : plan.layouts) {
    LayoutSpeed s;
    const int64_t rows = r.rows > 0 ? r.rows : std::min<int64_t>(in.max_seqs, g.concurrent_rows);
    if (g.fits && rows >= 1) {
      s.predicted = true;
      s.shape = RowShape{prompt, new_tokens, rows, in.max_batch_tokens};
      MachineModel rank = rep.rank;
      if (r.alpha_measured && cal)
        for (const TensorAlpha& a : cal->synced_alphas)
          if (a.tensor == g.tensor) rank.alpha_us = a.alpha_us;
      s.alpha_us = rank.alpha_us;
      s.p = predict_speed(config, Layout{in.world_size, g.tensor, g.pipeline}, dtypes, rank, s.shape);
    }
    rep.layouts.push_back(s);
  }
  return rep;
}

namespace {

nlohmann::json rates_json(const std::vector<GemmRate>& rates) {
  nlohmann::json a = nlohmann::json::array();
  for (const GemmRate& g : rates) a.push_back({{"rows", g.rows}, {"tflops", g.tflops}});
  return a;
}

nlohmann::json machine_json(const MachineModel& m) {
  return nlohmann::json{{"memory_gbs", m.memory_gbs},
                        {"gemm_tflops", m.gemm_tflops},
                        {"gemm_half_rows", m.gemm_half_rows},
                        {"alpha_us", m.alpha_us},
                        {"allreduce_gbs", m.allreduce_gbs},
                        {"internode_alpha_us", m.internode_alpha_us},
                        {"internode_gbs", m.internode_gbs},
                        {"ranks_per_node", m.ranks_per_node},
                        {"gemm_rates", rates_json(m.gemm_rates)},
                        {"attention_tflops", m.attention_tflops},
                        {"prefill_attention_tflops", m.prefill_attention_tflops},
                        {"layer_overhead_us", m.layer_overhead_us},
                        {"logits_overhead_us", m.logits_overhead_us},
                        {"oversubscription", m.oversubscription}};
}

// "1:0.0046,8:0.0258" as --gemm-rates takes it.
std::string rates_flag(const std::vector<GemmRate>& rates) {
  std::string s;
  char item[64];
  for (const GemmRate& g : rates) {
    std::snprintf(item, sizeof item, "%s%g:%.6g", s.empty() ? "" : ",", g.rows, g.tflops);
    s += item;
  }
  return s;
}

}  // namespace

void add_speed_json(nlohmann::json& j, const SpeedReport& rep) {
  nlohmann::json m = machine_json(rep.node);
  m["per_rank"] = machine_json(rep.rank);
  m["ranks_sharing_node"] = rep.ranks_sharing;
  m["memory_source"] = rep.memory_source;
  m["gemm_source"] = rep.gemm_source;
  m["allreduce_source"] = rep.allreduce_source;
  m["gemm_rates_source"] = rep.gemm_rates_source;
  m["attention_source"] = rep.attention_source;
  m["overhead_source"] = rep.overhead_source;
  if (rep.calibration) {
    const Calibration& c = *rep.calibration;
    m["calibration"] = {{"memory_gbs", c.memory_gbs},           {"gemm_tflops", c.gemm_tflops},
                        {"gemm_decode_tflops", c.gemm_decode_tflops}, {"gemm_half_rows", c.gemm_half_rows},
                        {"gemm_threads", c.gemm_threads},       {"allreduce_measured", c.allreduce_measured},
                        {"allreduce_ranks", c.allreduce_ranks}, {"alpha_us", c.alpha_us},
                        {"allreduce_gbs", c.allreduce_gbs},     {"synced_alpha_us", c.synced_alpha_us},
                        {"gemm_rates", rates_json(c.gemm_rates)},
                        {"gemm_rates_flag", rates_flag(c.gemm_rates)},
                        {"attention_tflops", c.attention_tflops},
                        {"prefill_attention_tflops", c.prefill_attention_tflops},
                        {"layer_overhead_us", c.layer_overhead_us},
                        {"logits_overhead_us", c.logits_overhead_us},
                        {"ranks_measuring", c.ranks_measuring},
                        {"cores", c.cores}};
    nlohmann::json alphas = nlohmann::json::array();
    for (const TensorAlpha& a : c.synced_alphas) alphas.push_back({{"tensor", a.tensor}, {"alpha_us", a.alpha_us}});
    m["calibration"]["synced_alphas"] = alphas;
  }
  j["machine"] = m;
  auto& layouts = j["layouts"];
  for (size_t i = 0; i < rep.layouts.size() && i < layouts.size(); ++i) {
    const LayoutSpeed& s = rep.layouts[i];
    if (!s.predicted) {
      layouts[i]["speed"] = nullptr;
      continue;
    }
    layouts[i]["speed"] = {{"prompt_tokens", s.shape.prompt_tokens},
                           {"new_tokens", s.shape.new_tokens},
                           {"rows_per_replica", s.shape.rows},
                           {"alpha_us", s.alpha_us},
                           {"decode_step_us", s.p.decode_step_us},
                           {"weight_read_us", s.p.weight_read_us},
                           {"gemm_us", s.p.gemm_us},
                           {"kv_read_us", s.p.kv_read_us},
                           {"attention_us", s.p.attention_us},
                           {"overhead_us", s.p.overhead_us},
                           {"micro_batch_rows", s.p.micro_batch_rows},
                           {"prefill_chunks", s.p.prefill_chunks},
                           {"prefill_s", s.p.prefill_s},
                           {"allreduce_us", s.p.allreduce_us},
                           {"handoff_us", s.p.handoff_us},
                           {"tokens_per_s_replica", s.p.tokens_per_s_replica},
                           {"tokens_per_s_total", s.p.tokens_per_s_total},
                           {"ttft_s", s.p.ttft_s},
                           {"batch_output_tokens_per_s", s.p.batch_output_tokens_per_s}};
  }
}

void print_speed_text(const SpeedReport& rep, const Plan& plan, std::ostream& out) {
  char line[256];
  const MachineModel& n = rep.node;
  std::snprintf(line, sizeof line,
                "\npredicted speed (plan/cost_model.h): memory %.1f GB/s (%s), GEMM %.3f TFLOP/s (%s, m_half %.1f rows), "
                "allreduce alpha %.2f us B %.2f GB/s (%s)",
                n.memory_gbs, rep.memory_source.c_str(), n.gemm_tflops, rep.gemm_source.c_str(), n.gemm_half_rows,
                n.alpha_us, n.allreduce_gbs, rep.allreduce_source.c_str());
  out << line;
  if (n.internode_gbs > 0 || n.internode_alpha_us > 0) {
    std::snprintf(line, sizeof line, "; pipeline hand-offs between nodes alpha %.2f us B %.2f GB/s",
                  n.internode_alpha_us > 0 ? n.internode_alpha_us : n.alpha_us,
                  n.internode_gbs > 0 ? n.internode_gbs : n.allreduce_gbs);
    out << line;
  }
  if (rep.ranks_sharing > 1) out << "; memory and GEMM shared by " << rep.ranks_sharing << " CPU ranks of a node";
  out << "\n";
  if (rep.calibration) {
    const Calibration& c = *rep.calibration;
    std::snprintf(line, sizeof line,
                  "calibration: read %.2f GB/s, gemm_nt fp32 %.1f GFLOP/s at 512x2048x2048, %.1f GFLOP/s at 32x2048x768 "
                  "(%d ranks x %d threads measuring at once; node totals)",
                  c.memory_gbs, c.gemm_tflops * 1e3, c.gemm_decode_tflops * 1e3, c.ranks_measuring, c.gemm_threads);
    out << line;
    if (!c.gemm_rates.empty()) {
      out << "; decode GEMM R(m) GFLOP/s streamed at the model's layer:";
      for (const GemmRate& g : c.gemm_rates) {
        std::snprintf(line, sizeof line, " %g:%.1f", g.rows, g.tflops * 1e3);
        out << line;
      }
      std::snprintf(line, sizeof line,
                    "; attention %.2f GFLOP/s decode, %.2f prefill; step overhead %.2f us a row a layer, %.1f us a row "
                    "for the logits",
                    c.attention_tflops * 1e3, c.prefill_attention_tflops * 1e3, c.layer_overhead_us,
                    c.logits_overhead_us);
      out << line;
    }
    if (c.allreduce_measured)
      std::snprintf(line, sizeof line,
                    "; MPI allreduce over %d ranks: alpha %.2f us back to back, %.2f us between GEMMs, B %.2f GB/s",
                    c.allreduce_ranks, c.alpha_us, c.synced_alpha_us, c.allreduce_gbs);
    else
      std::snprintf(line, sizeof line, "; allreduce not measured (run under mpirun with >= 2 ranks), model kept");
    out << line;
    for (size_t i = 0; i < c.synced_alphas.size(); ++i) {
      std::snprintf(line, sizeof line, "%s TP=%d %.2f us", i == 0 ? "; between GEMMs in TP groups (used):" : ",",
                    c.synced_alphas[i].tensor, c.synced_alphas[i].alpha_us);
      out << line;
    }
    out << "\n";
  }
  std::snprintf(line, sizeof line, "%4s %4s %4s %6s %8s %8s %12s %14s %14s %10s\n", "TP", "PP", "DP", "rows", "prompt",
                "new", "step ms", "tok/s replica", "tok/s total", "TTFT s");
  out << line;
  for (size_t i = 0; i < rep.layouts.size(); ++i) {
    const LayoutLedger& g = plan.layouts[i];
    const LayoutSpeed& s = rep.layouts[i];
    if (!s.predicted) {
      std::snprintf(line, sizeof line, "%4d %4d %4d %6s (does not fit)\n", g.tensor, g.pipeline, g.data, "-");
    } else {
      std::snprintf(line, sizeof line, "%4d %4d %4d %6lld %8lld %8lld %12.3f %14.1f %14.1f %10.3f\n", g.tensor,
                    g.pipeline, g.data, static_cast<long long>(s.shape.rows),
                    static_cast<long long>(s.shape.prompt_tokens), static_cast<long long>(s.shape.new_tokens),
                    s.p.decode_step_us / 1e3, s.p.tokens_per_s_replica, s.p.tokens_per_s_total, s.p.ttft_s);
    }
    out << line;
  }
  out << "(decode step = per stage max(weights / bandwidth, GEMM FLOPs / R(micro-batch rows)) + attention + "
         "step overhead + allreduces; max(PP x the slowest stage, their sum + hand-offs); rows per replica; GEMM rates "
      << rep.gemm_rates_source << ", attention rates " << rep.attention_source << ", overheads " << rep.overhead_source
      << ")\n";
}

}  // namespace tpbatch
