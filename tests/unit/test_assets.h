#pragma once
// Where the tests' assets are, all from the clone: the real model the tests run (the committed
// models/stories260K) and tests/data/ (see its README), whose tokenizer suites each build unpacks.
#include <filesystem>

namespace tpbatch::test {

inline std::filesystem::path stories_dir() { return std::filesystem::path(TPBATCH_SOURCE_DIR) / "models/stories260K"; }
inline std::filesystem::path test_data_dir() { return std::filesystem::path(TPBATCH_SOURCE_DIR) / "tests/data"; }
inline std::filesystem::path tokenizers_dir() { return TPBATCH_TEST_TOKENIZERS_DIR; }
inline std::filesystem::path stories_llama2c_dir() { return test_data_dir() / "models/stories260K-llama2c"; }

}  // namespace tpbatch::test
