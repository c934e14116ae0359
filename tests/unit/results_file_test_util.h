#pragma once
// What the results-file tests share: a per-test folder with results.h5 in it, a small job's
// RunInfo and a small finished row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "temp_dir_test.h"
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
class ResultsFileTest : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    path_ = (dir_ / "results.h5").string();
  }

  std::string path_;  // dir_/results.h5
};

}  // namespace tpbatch
