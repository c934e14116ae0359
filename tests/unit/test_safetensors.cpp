// safetensors header validation and the memory-mapped WeightStore.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "temp_dir_test.h"
#include "common/error.h"
#include "model/safetensors.h"
#include "test_assets.h"

namespace fs = std::filesystem;
using nlohmann::json;
using tpbatch::DType;
using tpbatch::Error;
using tpbatch::WeightStore;

namespace {

struct RawTensor {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <class T>
std::vector<uint8_t> to_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// Header JSON text (with consecutive data_offsets) and the data section.
std::pair<std::string, std::vector<uint8_t>> layout(const std::vector<RawTensor>& tensors) {
  json h = json::object();
  h["__metadata__"] = {{"format", "pt"}};
  std::vector<uint8_t> data;
  for (const RawTensor& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  return {h.dump(), data};
}

std::vector<uint8_t> file_bytes(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// The Error message of parsing a header (empty when it parses).
std::string header_error(const std::vector<uint8_t>& bytes) {
  try {
    tpbatch::parse_safetensors_header(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "dir/model.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// 3 x 5 tensors with known values in each dtype.
std::vector<float> f32_values() {
  std::vector<float> v;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) v.push_back(float(r * 10 + c) + 0.25f);
  return v;
}
const std::vector<uint16_t> kHalfBits = {0x3C00, 0xC000, 0x3800, 0x0001, 0x7BFF, 0x3555, 0x0000, 0x8000,
                                         0x7C00, 0xFC00, 0x4248, 0x0400, 0x03FF, 0xBC00, 0x4900};
const std::vector<float> kHalfValues = {1.0f, -2.0f, 0.5f, 0x1p-24f, 65504.0f, 0.333251953125f, 0.0f, -0.0f,
                                        std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                        3.140625f, 0x1p-14f, 1023 * 0x1p-24f, -1.0f, 10.0f};
std::vector<float> bf16_values() {
  std::vector<float> v;
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) v.push_back(-float(r * 10 + c) * 0.25f);
  return v;
}
std::vector<uint16_t> bf16_bits(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float f : v) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    out.push_back(uint16_t(u >> 16));  // exact: values have few mantissa bits
  }
  return out;
}

class WeightStoreTest : public tpbatch::TempDirTest {
 protected:

  std::vector<RawTensor> sample() const {
    return {{"a.f32", "F32", {3, 5}, to_bytes(f32_values())},
            {"b.f16", "F16", {3, 5}, to_bytes(kHalfBits)},
            {"c.bf16", "BF16", {3, 5}, to_bytes(bf16_bits(bf16_values()))},
            {"d.vec", "F32", {4}, to_bytes(std::vector<float>{1, 2, 3, 4})}};
  }
  void write_model(const std::vector<RawTensor>& tensors, const std::string& file = "model.safetensors") {
    auto [h, d] = layout(tensors);
    write_bytes(dir_ / file, file_bytes(h, d));
  }
  std::string open_error() {
    try {
      WeightStore::open(dir_);
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 1);
      return e.what();
    }
    return "";
  }
};


}  // namespace

// ---- parse_safetensors_header ---------------------------------------------------------------------

TEST(Safetensors, ParsesHeaderWithMetadata) {
  auto [h, d] = layout({{"x", "F32", {2, 3}, std::vector<uint8_t>(24)}, {"y", "BF16", {5}, std::vector<uint8_t>(10)}});
  const auto bytes = file_bytes(h, d);
  const auto ts = tpbatch::parse_safetensors_header(reinterpret_cast<const std::byte*>(bytes.data()), bytes.size(), "f");
  ASSERT_EQ(ts.size(), 2u);
  EXPECT_EQ(ts[0].name, "x");
  EXPECT_EQ(ts[0].dtype, DType::F32);
  EXPECT_EQ(ts[0].shape, std::vector<int64_t>({2, 3}));
  EXPECT_EQ(ts[0].begin, 0u);
  EXPECT_EQ(ts[0].end, 24u);
  EXPECT_EQ(ts[0].numel(), 6);
  EXPECT_EQ(ts[1].dtype, DType::BF16);
  EXPECT_EQ(ts[1].begin, 24u);
  EXPECT_EQ(ts[1].file, "f");
}

TEST(Safetensors, AcceptsHeaderPaddedWithSpaces) {
  auto [h, d] = layout({{"x", "F16", {3}, std::vector<uint8_t>(6)}});
  h += "     ";
  EXPECT_EQ(header_error(file_bytes(h, d)), "");
}

TEST(Safetensors, FileShorterThanEightBytesIsRejected) {
  const std::string msg = header_error({1, 0, 0});
  EXPECT_NE(msg.find("dir/model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 bytes"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderLengthPastEndOfFileIsRejected) {
  auto bytes = file_bytes(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::vector<uint8_t>(4));
  bytes[0] = 0xff;
  bytes[1] = 0xff;
  const std::string msg = header_error(bytes);
  EXPECT_NE(msg.find("header length"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dir/model.safetensors"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderNotJsonIsRejected) {
  const std::string msg = header_error(file_bytes("{\"x\": [1,", {}));
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
  EXPECT_NE(header_error(file_bytes("[1, 2]", {})).find("not a JSON object"), std::string::npos);
}

TEST(Safetensors, UnknownDtypeNamesTensorAndDtype) {
  auto [h, d] = layout({{"model.tok_ids", "F64", {2}, std::vector<uint8_t>(16)}});
  const std::string msg = header_error(file_bytes(h, d));
  EXPECT_NE(msg.find("model.tok_ids"), std::string::npos) << msg;
  EXPECT_NE(msg.find("F64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dir/model.safetensors"), std::string::npos) << msg;
}

TEST(Safetensors, ShapeDisagreeingWithByteRangeIsRejected) {
  auto [h, d] = layout({{"w", "F32", {2, 3}, std::vector<uint8_t>(20)}});
  const std::string msg = header_error(file_bytes(h, d));
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2, 3]"), std::string::npos) << msg;
}

TEST(Safetensors, OffsetsPastEndOfFileAreRejected) {
  auto [h, d] = layout({{"a", "F32", {4}, std::vector<uint8_t>(16)}, {"b", "F32", {4}, std::vector<uint8_t>(16)}});
  auto bytes = file_bytes(h, d);
  bytes.resize(bytes.size() - 5);  // a truncated download
  const std::string msg = header_error(bytes);
  EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("past the end"), std::string::npos) << msg;
}

TEST(Safetensors, OverlappingRangesAreRejected) {
  const std::string h =
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  const std::string msg = header_error(file_bytes(h, std::vector<uint8_t>(16)));
  EXPECT_NE(msg.find("overlap"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'a'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'b'"), std::string::npos) << msg;
}

TEST(Safetensors, DtypeHelpers) {
  EXPECT_EQ(tpbatch::dtype_size(DType::F32), 4u);
  EXPECT_EQ(tpbatch::dtype_size(DType::F16), 2u);
  EXPECT_EQ(tpbatch::dtype_size(DType::BF16), 2u);
  EXPECT_STREQ(tpbatch::dtype_name(DType::BF16), "BF16");
}

// ---- WeightStore ----------------------------------------------------------------------------------

TEST_F(WeightStoreTest, OpensSingleFile) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  EXPECT_EQ(ws.names(), std::vector<std::string>({"a.f32", "b.f16", "c.bf16", "d.vec"}));
  EXPECT_TRUE(ws.has("b.f16"));
  EXPECT_FALSE(ws.has("zzz"));
  const auto& t = ws.tensor("c.bf16");
  EXPECT_EQ(t.dtype, DType::BF16);
  EXPECT_NE(t.data, nullptr);
  EXPECT_NE(t.file.find("model.safetensors"), std::string::npos);
}

TEST_F(WeightStoreTest, MissingTensorIsNamed) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  try {
    ws.tensor("model.norm.weight");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.norm.weight"), std::string::npos) << e.what();
  }
}

TEST_F(WeightStoreTest, ReadF32SubBlockOfF32) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  std::vector<float> out(6, -1.0f);
  ws.read_f32("a.f32", 1, 2, 1, 3, out.data());
  EXPECT_EQ(out, std::vector<float>({11.25f, 12.25f, 13.25f, 21.25f, 22.25f, 23.25f}));
}

TEST_F(WeightStoreTest, ReadF32FullWidthRowsOfF32) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  std::vector<float> out(10);
  ws.read_f32("a.f32", 1, 2, 0, 5, out.data());
  const auto all = f32_values();
  EXPECT_EQ(out, std::vector<float>(all.begin() + 5, all.end()));
}

TEST_F(WeightStoreTest, ReadF32SubBlockOfF16) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  std::vector<float> all(15);
  ws.read_f32("b.f16", 0, 3, 0, 5, all.data());
  for (size_t i = 0; i < 15; ++i) {
    EXPECT_EQ(all[i], kHalfValues[i]) << "element " << i;
    EXPECT_EQ(std::signbit(all[i]), std::signbit(kHalfValues[i])) << "element " << i;
  }
  std::vector<float> out(4);
  ws.read_f32("b.f16", 1, 2, 3, 2, out.data());
  EXPECT_EQ(out, std::vector<float>({kHalfValues[8], kHalfValues[9], kHalfValues[13], kHalfValues[14]}));
}

TEST_F(WeightStoreTest, ReadF16NaNStaysNaN) {
  write_model({{"n", "F16", {2}, to_bytes(std::vector<uint16_t>{0x7E00, 0xFC01})}});
  const WeightStore ws = WeightStore::open(dir_);
  float out[2];
  ws.read_f32("n", 0, 1, 0, 2, out);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::isnan(out[1]));
}

TEST_F(WeightStoreTest, ReadF32SubBlockOfBF16) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  std::vector<float> out(3);
  ws.read_f32("c.bf16", 2, 1, 2, 3, out.data());
  const auto all = bf16_values();
  EXPECT_EQ(out, std::vector<float>({all[12], all[13], all[14]}));
}

TEST_F(WeightStoreTest, ReadF32OfOneDimensionalTensorIsOneRow) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  std::vector<float> out(2);
  ws.read_f32("d.vec", 0, 1, 1, 2, out.data());
  EXPECT_EQ(out, std::vector<float>({2, 3}));
}

TEST_F(WeightStoreTest, ReadF32OutOfRangeBlockIsRejected) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  std::vector<float> out(100);
  EXPECT_THROW(ws.read_f32("a.f32", 2, 2, 0, 5, out.data()), Error);
  EXPECT_THROW(ws.read_f32("a.f32", 0, 1, 3, 3, out.data()), Error);
  EXPECT_THROW(ws.read_f32("d.vec", 1, 1, 0, 1, out.data()), Error);
  EXPECT_THROW(ws.read_f32("a.f32", -1, 1, 0, 1, out.data()), Error);
}

TEST_F(WeightStoreTest, ExpectShapeMismatchNamesTensorAndShapes) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  EXPECT_NO_THROW(ws.expect_shape("a.f32", {3, 5}));
  try {
    ws.expect_shape("a.f32", {5, 3});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("a.f32"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 5]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[5, 3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  }
}

TEST_F(WeightStoreTest, TruncatedFileIsRejectedOnOpen) {
  write_model(sample());
  fs::resize_file(dir_ / "model.safetensors", fs::file_size(dir_ / "model.safetensors") - 3);
  const std::string msg = open_error();
  EXPECT_NE(msg.find("d.vec"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
}

TEST_F(WeightStoreTest, EmptyFileIsRejectedOnOpen) {
  write_bytes(dir_ / "model.safetensors", {});
  EXPECT_NE(open_error().find("model.safetensors"), std::string::npos);
}

TEST_F(WeightStoreTest, NoWeightsFileIsAnError) {
  const std::string msg = open_error();
  EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << msg;
  fs::remove_all(dir_);
  EXPECT_NE(open_error().find(dir_.string()), std::string::npos);
}

TEST_F(WeightStoreTest, OpensShardedIndex) {
  auto ts = sample();
  write_model({ts[0], ts[1]}, "model-00001-of-00002.safetensors");
  write_model({ts[2], ts[3]}, "model-00002-of-00002.safetensors");
  json idx = {{"metadata", {{"total_size", 0}}},
              {"weight_map",
               {{"a.f32", "model-00001-of-00002.safetensors"},
                {"b.f16", "model-00001-of-00002.safetensors"},
                {"c.bf16", "model-00002-of-00002.safetensors"},
                {"d.vec", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << idx.dump();
  const WeightStore ws = WeightStore::open(dir_);
  EXPECT_EQ(ws.names().size(), 4u);
  EXPECT_NE(ws.tensor("d.vec").file.find("00002"), std::string::npos);
  std::vector<float> out(2);
  ws.read_f32("d.vec", 0, 1, 2, 2, out.data());
  EXPECT_EQ(out, std::vector<float>({3, 4}));
  ws.read_f32("a.f32", 0, 1, 0, 2, out.data());
  EXPECT_EQ(out, std::vector<float>({0.25f, 1.25f}));
}

TEST_F(WeightStoreTest, MissingShardIsNamed) {
  auto ts = sample();
  write_model({ts[0]}, "model-00001-of-00002.safetensors");
  json idx = {{"weight_map", {{"a.f32", "model-00001-of-00002.safetensors"}, {"b.f16", "model-00002-of-00002.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << idx.dump();
  const std::string msg = open_error();
  EXPECT_NE(msg.find("model-00002-of-00002.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("b.f16"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.safetensors.index.json"), std::string::npos) << msg;
}

TEST_F(WeightStoreTest, TensorAbsentFromItsShardIsNamed) {
  auto ts = sample();
  write_model({ts[0]}, "shard1.safetensors");
  json idx = {{"weight_map", {{"a.f32", "shard1.safetensors"}, {"ghost.weight", "shard1.safetensors"}}}};
  std::ofstream(dir_ / "model.safetensors.index.json") << idx.dump();
  const std::string msg = open_error();
  EXPECT_NE(msg.find("ghost.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shard1.safetensors"), std::string::npos) << msg;
}

TEST_F(WeightStoreTest, BadIndexJsonIsNamed) {
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": ";
  EXPECT_NE(open_error().find("model.safetensors.index.json"), std::string::npos);
}

TEST_F(WeightStoreTest, DropPageCacheKeepsDataReadable) {
  write_model(sample());
  const WeightStore ws = WeightStore::open(dir_);
  std::vector<float> before(15), after(15);
  ws.read_f32("a.f32", 0, 3, 0, 5, before.data());
  ws.drop_page_cache();
  ws.read_f32("a.f32", 0, 3, 0, 5, after.data());
  EXPECT_EQ(before, after);
}

TEST_F(WeightStoreTest, MovedStoreKeepsMappings) {
  write_model(sample());
  WeightStore a = WeightStore::open(dir_);
  WeightStore b = std::move(a);
  std::vector<float> out(1);
  b.read_f32("d.vec", 0, 1, 3, 1, out.data());
  EXPECT_EQ(out[0], 4.0f);
}

TEST(WeightStore, OpensStories260K) {
  const fs::path dir = tpbatch::test::stories_dir();
  const WeightStore ws = WeightStore::open(dir);
  ws.expect_shape("model.embed_tokens.weight", {512, 64});
  ws.expect_shape("model.layers.4.mlp.down_proj.weight", {64, 172});
  ws.expect_shape("model.layers.0.self_attn.k_proj.weight", {32, 64});
  std::vector<float> row(64);
  ws.read_f32("model.norm.weight", 0, 1, 0, 64, row.data());
  for (float x : row) EXPECT_TRUE(std::isfinite(x));
}

TEST(Safetensors, TensorNamedTwiceIsRejectedNamingIt) {
  // The JSON parser alone would keep the second entry and drop the first silently.
  const std::string h =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  const std::string msg = header_error(file_bytes(h, std::vector<uint8_t>(16)));
  EXPECT_NE(msg.find("tensor 'a' appears twice"), std::string::npos) << msg;
  // A key named twice inside one entry is not a duplicated tensor.
  const std::string ok = R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(header_error(file_bytes(ok, std::vector<uint8_t>(8))), "");
}
