#pragma once
// What the results-file tests share: a per-test folder with results.h5 in it, a small job's
// RunInfo and a small finished row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "io/result_writer.h"

namespace tpbatch {

// A generate job of `rows` rows on models/tiny.
inline RunInfo small_job(int64_t rows) {
  RunInfo i;
  i.model = "models/tiny";
  i.task = "generate";
  i.job_yaml = "model: models/tiny\ntask: generate\n";
  i.num_rows = rows;
  return i;
}

// Row i, finished by its length: two prompt tokens, one output token.
inline RowResult small_row(int64_t i) {
  RowResult r;
  r.index = i;
  r.id = "id-" + std::to_string(i);
  r.prompt_tokens = {1, 2};
  r.output_tokens = {7};
  r.output_text = "text";
  r.finish_reason = FinishReason::kLength;
  return r;
}

// Each test gets its own empty folder (named after the test and the process), removed after it.
class ResultsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* ti = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("tpbatch_" + std::string(ti->test_suite_name()) + "_" + ti->name() + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "results.h5").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string path_;  // dir_/results.h5
};

}  // namespace tpbatch
