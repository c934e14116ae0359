// 4-bit checkpoints read a slice at a time: for each format make-model writes (awq, gptq,
// compressed-tensors W4A16), every block of rows x columns the loader may ask for -- slices that
// start on odd columns, inside a group, end on an odd width, cross output words of 8 -- unpacks to
// (q - zero) * scale values equal to the dequantized twin's float32 tensor (tests/mpi's numpy
// reference checks the twin against each format's own dequantization).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/int4_checkpoint.h"
#include "model/safetensors.h"
#include "tools/make_model.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

TEST(Int4Checkpoint, EverySliceUnpacksToTheDequantizedTwin) {
  const fs::path root = fs::temp_directory_path() / ("tpbatch_test_int4_ckpt_" + std::to_string(::getpid()));
  for (const char* scheme : {"awq", "gptq", "w4a16"}) {
    MakeModelOptions o;
    o.hidden_size = 256;
    o.intermediate_size = 384;
    o.num_heads = 8;
    o.num_kv_heads = 4;
    o.head_dim = 32;
    o.num_layers = 1;
    o.quantize = scheme;
    make_model(root / scheme, o);
    o.dequantize = true;
    make_model(root / (std::string(scheme) + "-twin"), o);
    const ModelConfig cfg = load_model_config(root / scheme);
    WeightStore q = WeightStore::open(root / scheme);
    add_int4_weights(q, cfg.quantization);
    const WeightStore twin = WeightStore::open(root / (std::string(scheme) + "-twin"));
    const std::string name = "model.layers.0.mlp.down_proj.weight";  // [256, 384]: three groups of 128
    ASSERT_EQ(q.tensor(name).dtype, DType::I4) << scheme;
    ASSERT_EQ(q.tensor(name).shape, (std::vector<int64_t>{256, 384})) << scheme;
    struct Slice {
      int64_t row0, nrows, col0, ncols;
    };
    for (Slice s : {Slice{0, 256, 0, 384}, Slice{3, 13, 37, 101}, Slice{128, 128, 192, 192}, Slice{255, 1, 383, 1},
                    Slice{7, 2, 127, 2}}) {
      const Int4Slice got = read_int4_slice(q, cfg.quantization, q.tensor(name), s.row0, s.nrows, s.col0, s.ncols);
      std::vector<float> want(size_t(s.nrows * s.ncols));
      twin.read_f32(name, s.row0, s.nrows, s.col0, s.ncols, want.data());
      EXPECT_EQ(got.group, 128);
      EXPECT_EQ(got.phase, s.col0 % 128);
      const int64_t rb = (s.ncols + 1) / 2;
      for (int64_t r = 0; r < s.nrows; ++r)
        for (int64_t c = 0; c < s.ncols; ++c) {
          const int v = (got.values[size_t(r * rb + c / 2)] >> (4 * (c % 2))) & 0xf;
          const size_t i = size_t(r * got.groups + (c + got.phase) / got.group);
          ASSERT_EQ((float(v) - got.zeros[i]) * got.scales[i], want[size_t(r * s.ncols + c)])
              << scheme << " slice rows " << s.row0 << "+" << s.nrows << " cols " << s.col0 << "+" << s.ncols
              << " at " << r << "," << c;
        }
    }
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace tpbatch
