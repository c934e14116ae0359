// tpbatch_reference: command-line front end of the independent reference model.
//
//   tpbatch_reference MODEL_DIR --ids 1,403,407 [--max-new-tokens 64]
//       greedy generation: prints the new ids, space-separated, on one line
//   tpbatch_reference MODEL_DIR --ids 1,2,3 --score [--targets-from N]
//       for each position p with N <= p < len: log P(ids[p] | ids[<p]), one per line (%.9g)
//       (N defaults to 1 and must be >= 1)
//   tpbatch_reference MODEL_DIR --ids 1,2,3 --logits
//       the logits of the last position, one per line (%.9g)
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "reference_llama.h"

namespace {

const char* kUsage =
    "usage: tpbatch_reference MODEL_DIR --ids ID,ID,... [--max-new-tokens N]\n"
    "       tpbatch_reference MODEL_DIR --ids ID,ID,... --score [--targets-from N]\n"
    "       tpbatch_reference MODEL_DIR --ids ID,ID,... --logits\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "tpbatch_reference: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

int parse_int(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used != text.size()) throw std::invalid_argument(text);
    return value;
  } catch (const std::exception&) {
    usage_error("bad " + what + ": '" + text + "'");
  }
}

std::vector<int> parse_ids(const std::string& text) {
  std::vector<int> ids;
  std::string item;
  std::stringstream ss(text);
  while (std::getline(ss, item, ',')) {
    // allow spaces around ids
    const auto b = item.find_first_not_of(" \t");
    const auto e = item.find_last_not_of(" \t");
    if (b == std::string::npos) continue;
    ids.push_back(parse_int(item.substr(b, e - b + 1), "id"));
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir;
  std::vector<int> ids;
  bool have_ids = false, score = false, want_logits = false;
  int max_new_tokens = 64;
  int targets_from = 1;

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0) {
      const auto eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        inline_value = true;
      }
    }
    auto next_value = [&]() -> std::string {
      if (inline_value) return value;
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--ids") {
      ids = parse_ids(next_value());
      have_ids = true;
    } else if (arg == "--max-new-tokens") {
      max_new_tokens = parse_int(next_value(), "--max-new-tokens");
    } else if (arg == "--targets-from") {
      targets_from = parse_int(next_value(), "--targets-from");
    } else if (arg == "--score") {
      score = true;
    } else if (arg == "--logits") {
      want_logits = true;
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg.rfind("-", 0) == 0) {
      usage_error("unknown option " + arg);
    } else if (model_dir.empty()) {
      model_dir = arg;
    } else {
      usage_error("unexpected argument " + arg);
    }
  }
  if (model_dir.empty()) usage_error("missing MODEL_DIR");
  if (!have_ids || ids.empty()) usage_error("missing or empty --ids");
  if (score && want_logits) usage_error("--score and --logits are exclusive");

  try {
    const ReferenceLlama model(model_dir);
    if (score) {
      if (targets_from < 1) usage_error("--targets-from must be >= 1");
      const auto all = model.logits(ids);
      for (size_t p = static_cast<size_t>(targets_from); p < ids.size(); ++p) {
        const auto lp = ReferenceLlama::log_softmax(all[p - 1]);
        std::printf("%.9g\n", lp[ids[p]]);
      }
    } else if (want_logits) {
      const auto all = model.logits(ids);
      for (double v : all.back()) std::printf("%.9g\n", v);
    } else {
      if (max_new_tokens < 0) usage_error("--max-new-tokens must be >= 0");
      const auto out = model.greedy(ids, max_new_tokens);
      for (size_t i = 0; i < out.size(); ++i) std::printf(i ? " %d" : "%d", out[i]);
      std::printf("\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpbatch_reference: %s\n", e.what());
    return 1;
  }
  return 0;
}
