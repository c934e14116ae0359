// Checkpoint checks beyond the header: NaN/Inf values (named by tensor and element, the scan shared
// by the ranks) and tensors of layers the config does not use.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "common/error.h"
#include "model/weight_checks.h"

namespace fs = std::filesystem;
using namespace tpbatch;

namespace {

struct RawTensor {
  std::string name, dtype;
  int64_t numel;
  std::string bytes;
};

// A model folder with one model.safetensors holding these 1-D tensors.
fs::path write_raw_model(const std::vector<RawTensor>& tensors) {
  const fs::path dir = fs::temp_directory_path() /
                       ("tpbatch_wc_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) +
                        "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string header = "{";
  std::string data;
  for (const RawTensor& t : tensors) {
    const size_t at = data.size();
    data += t.bytes;
    header += (header.size() > 1 ? "," : "") + std::string("\"") + t.name + "\":{\"dtype\":\"" + t.dtype +
              "\",\"shape\":[" + std::to_string(t.numel) + "],\"data_offsets\":[" + std::to_string(at) + "," +
              std::to_string(data.size()) + "]}";
  }
  header += "}";
  std::ofstream f(dir / "model.safetensors", std::ios::binary);
  const uint64_t n = header.size();
  f.write(reinterpret_cast<const char*>(&n), 8);
  f << header << data;
  return dir;
}

// F32 tensors "<name>".
fs::path write_model(const std::vector<std::pair<std::string, std::vector<float>>>& tensors) {
  std::vector<RawTensor> raw;
  for (const auto& [name, values] : tensors)
    raw.push_back({name, "F32", int64_t(values.size()),
                   std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4)});
  return write_raw_model(raw);
}

std::string finite_error(const WeightStore& w, int rank, int ranks) {
  try {
    check_weights_finite(w, rank, ranks);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(WeightChecks, NaNAndInfNamedByTensorAndElement) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const fs::path dir = write_model({{"a", {1, 2, 3, 4}}, {"b", {0, 0, nan, 0}}, {"c", {-inf, 0, 0, 0}}});
  const WeightStore w = WeightStore::open(dir);
  EXPECT_NE(finite_error(w, 0, 1).find("tensor 'b': element 2 is NaN"), std::string::npos) << finite_error(w, 0, 1);
  // Two ranks share the scan (names in order a, b, c: rank 0 reads a and c, rank 1 reads b).
  EXPECT_NE(finite_error(w, 0, 2).find("tensor 'c': element 0 is Inf"), std::string::npos) << finite_error(w, 0, 2);
  EXPECT_NE(finite_error(w, 1, 2).find("tensor 'b'"), std::string::npos) << finite_error(w, 1, 2);
  fs::remove_all(dir);
}

// The GEMM's in-register e4m3 conversion has no NaN: a checkpoint holding one is refused here.
TEST(WeightChecks, Fp8NaNCodesAreNamedAndEveryOtherCodePasses) {
  std::string every;
  for (int b = 0; b < 256; ++b)
    if ((b & 0x7f) != 0x7f) every += char(b);
  const fs::path dir = write_raw_model({{"a", "F8_E4M3", int64_t(every.size()), every},
                                        {"b", "F8_E4M3", 4, std::string("\x38\x00\xff\x38", 4)}});
  const WeightStore w = WeightStore::open(dir);
  EXPECT_EQ(finite_error(w, 0, 2), "");  // two ranks: rank 0 scans a alone, every code but the NaNs
  EXPECT_NE(finite_error(w, 0, 1).find("tensor 'b': element 2 is NaN"), std::string::npos) << finite_error(w, 0, 1);
  fs::remove_all(dir);
}

TEST(WeightChecks, FiniteCheckpointPasses) {
  const fs::path dir = write_model({{"a", {1, -2, 3e38f, 1e-45f}}});
  EXPECT_EQ(finite_error(WeightStore::open(dir), 0, 1), "");
  fs::remove_all(dir);
}

TEST(WeightChecks, TensorsOfUnusedLayersAreNamed) {
  const fs::path dir = write_model({{"model.layers.0.w", {1, 1, 1, 1}},
                                    {"model.layers.1.w", {1, 1, 1, 1}},
                                    {"model.layers.1.v", {1, 1, 1, 1}},
                                    {"model.layers.10.w", {1, 1, 1, 1}},
                                    {"model.norm.weight", {1, 1, 1, 1}}});
  ModelConfig cfg;
  cfg.num_layers = 1;
  const std::vector<std::string> unused = unused_layer_tensors(WeightStore::open(dir), cfg);
  EXPECT_EQ(unused, (std::vector<std::string>{"model.layers.1.v", "model.layers.1.w", "model.layers.10.w"}));
  EXPECT_EQ(unused_tensors_warning(unused, cfg),
            "3 tensors of the checkpoint are not used: layers 1, 10 (config.json num_hidden_layers = 1): "
            "model.layers.1.v, model.layers.1.w, model.layers.10.w");
  cfg.num_layers = 11;
  EXPECT_TRUE(unused_layer_tensors(WeightStore::open(dir), cfg).empty());
  fs::remove_all(dir);
}
