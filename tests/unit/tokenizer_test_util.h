#pragma once
// Helpers shared by the tokenizer tests: where the assets are (test_assets.h) and cases.jsonl.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test_assets.h"

namespace tpbatch::test {

struct TokCase {
  std::string text;
  std::vector<int32_t> ids;
  bool add_special_tokens = false;
};

inline std::vector<TokCase> read_cases(const std::filesystem::path& file) {
  std::vector<TokCase> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line);
    out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>(),
                   j.value("add_special_tokens", false)});
  }
  return out;
}

}  // namespace tpbatch::test
