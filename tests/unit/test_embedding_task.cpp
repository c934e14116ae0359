// task: embed and input.truncate on the host side: pooling over prefill
// chunks, the /embedding and /truncated_tokens datasets (layout, round trip, resume in place and
// after a cut-off run), and the row result's transport between ranks.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "temp_dir_test.h"
#include "common/error.h"
#include "engine/embedding_pooling.h"
#include "io/input_row.h"
#include "io/result_writer.h"
#include "io/row_result.h"
#include "job/job_spec.h"

namespace fs = std::filesystem;
using namespace tpbatch;

TEST(EmbeddingPooling, RowsOfEachChunk) {
  // A 10-token prompt prefilled as chunks [0,4) [4,8) [8,10).
  EXPECT_EQ(pooled_rows(Pooling::Cls, 0, 4, 10)->first, 0);
  EXPECT_EQ(pooled_rows(Pooling::Cls, 0, 4, 10)->count, 1);
  EXPECT_FALSE(pooled_rows(Pooling::Cls, 4, 4, 10));
  EXPECT_FALSE(pooled_rows(Pooling::Last, 0, 4, 10));
  EXPECT_FALSE(pooled_rows(Pooling::Last, 4, 4, 10));
  EXPECT_EQ(pooled_rows(Pooling::Last, 8, 2, 10)->first, 1);
  EXPECT_EQ(pooled_rows(Pooling::Last, 8, 2, 10)->count, 1);
  for (int64_t p0 : {0, 4}) {
    EXPECT_EQ(pooled_rows(Pooling::Mean, p0, 4, 10)->first, 0);
    EXPECT_EQ(pooled_rows(Pooling::Mean, p0, 4, 10)->count, 4);
  }
  // One chunk of one token: cls and last are the same row.
  EXPECT_EQ(pooled_rows(Pooling::Cls, 0, 1, 1)->first, 0);
  EXPECT_EQ(pooled_rows(Pooling::Last, 0, 1, 1)->first, 0);
}

TEST(EmbeddingPooling, MeanOverChunksAndNormalisation) {
  EmbeddingAccumulator acc;
  const float a[2] = {1, 2}, b[2] = {5, 10};  // sums of 1 and of 3 rows
  acc.add(a, 2, 1);
  acc.add(b, 2, 3);
  const std::vector<float> mean = acc.finish(Pooling::Mean, false);
  EXPECT_FLOAT_EQ(mean[0], 1.5f);
  EXPECT_FLOAT_EQ(mean[1], 3.0f);
  const std::vector<float> unit = acc.finish(Pooling::Mean, true);
  EXPECT_NEAR(unit[0], 1.5 / std::sqrt(1.5 * 1.5 + 9.0), 1e-7);
  EXPECT_NEAR(std::hypot(unit[0], unit[1]), 1.0, 1e-6);
  // last / cls: the one row's state as it is.
  EmbeddingAccumulator one;
  one.add(b, 2, 1);
  EXPECT_EQ(one.finish(Pooling::Last, false), (std::vector<float>{5, 10}));
  // A preempted prompt starts over.
  acc.reset();
  acc.add(a, 2, 1);
  EXPECT_EQ(acc.finish(Pooling::Mean, false), (std::vector<float>{1, 2}));
  // Zero stays zero under normalisation (no NaN).
  EmbeddingAccumulator zero;
  const float z[2] = {0, 0};
  zero.add(z, 2, 1);
  EXPECT_EQ(zero.finish(Pooling::Cls, true), (std::vector<float>{0, 0}));
}

TEST(EmbeddingRowResult, TravelsBetweenRanks) {
  RowResult r;
  r.index = 3;
  r.finish_reason = FinishReason::kEmbedded;
  r.embedding = {0.25f, -1.5f, 3.0f};
  r.truncated_tokens = 7;
  const RowResult back = deserialize_row_result(serialize(r));
  EXPECT_EQ(back.embedding, r.embedding);
  EXPECT_EQ(back.truncated_tokens, 7);
}

namespace {

constexpr int64_t kDim = 5;

RunInfo embed_info(int64_t rows) {
  RunInfo i;
  i.model = "models/tiny";
  i.task = "embed";
  i.job_yaml = "model: models/tiny\ntask: embed\nembed:\n  pooling: mean\n  normalize: true\n";
  i.num_rows = rows;
  i.embedding_dim = kDim;
  i.truncated_tokens = true;
  return i;
}

RowResult embed_row(int64_t i) {
  RowResult r;
  r.index = i;
  r.id = "r" + std::to_string(i);
  r.prompt_tokens = {1, static_cast<int32_t>(i + 2)};
  if (i % 3 == 2) {
    r.finish_reason = FinishReason::kError;
    r.error = "bad line";
    return r;
  }
  r.finish_reason = FinishReason::kEmbedded;
  for (int64_t k = 0; k < kDim; ++k) r.embedding.push_back(static_cast<float>(i * 10 + k) / 7.0f);
  r.truncated_tokens = i;
  return r;
}

struct H5File {
  hid_t id;
  explicit H5File(const std::string& p) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_file_locking(fapl, false, true);
    id = H5Fopen(p.c_str(), H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
  }
  ~H5File() { H5Fclose(id); }
};

// /embedding as [rows][dim], with its chunking and maximum dims.
std::vector<float> read_embedding(const std::string& path, hsize_t* dims, hsize_t* maxdims, hsize_t* chunk) {
  H5File f(path);
  hid_t ds = H5Dopen2(f.id, "embedding", H5P_DEFAULT);
  EXPECT_GE(ds, 0);
  hid_t sp = H5Dget_space(ds);
  EXPECT_EQ(H5Sget_simple_extent_ndims(sp), 2);
  H5Sget_simple_extent_dims(sp, dims, maxdims);
  hid_t dcpl = H5Dget_create_plist(ds);
  EXPECT_EQ(H5Pget_layout(dcpl), H5D_CHUNKED);
  H5Pget_chunk(dcpl, 2, chunk);
  hid_t t = H5Dget_type(ds);
  EXPECT_TRUE(H5Tequal(t, H5T_IEEE_F32LE) > 0);
  std::vector<float> v(dims[0] * dims[1]);
  if (!v.empty()) H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Tclose(t);
  H5Pclose(dcpl);
  H5Sclose(sp);
  H5Dclose(ds);
  return v;
}

std::vector<int64_t> read_truncated(const std::string& path) {
  H5File f(path);
  hid_t ds = H5Dopen2(f.id, "truncated_tokens", H5P_DEFAULT);
  EXPECT_GE(ds, 0);
  hid_t sp = H5Dget_space(ds);
  hsize_t n = 0;
  H5Sget_simple_extent_dims(sp, &n, nullptr);
  std::vector<int64_t> v(n);
  if (n) H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
  H5Sclose(sp);
  H5Dclose(ds);
  return v;
}

class EmbeddingResults : public tpbatch::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    path_ = (dir_ / "results.h5").string();
  }

  void expect_rows(int64_t n) {
    hsize_t dims[2], maxdims[2], chunk[2];
    const std::vector<float> e = read_embedding(path_, dims, maxdims, chunk);
    ASSERT_EQ(dims[0], static_cast<hsize_t>(n));
    ASSERT_EQ(dims[1], static_cast<hsize_t>(kDim));
    EXPECT_EQ(maxdims[0], H5S_UNLIMITED);
    EXPECT_EQ(chunk[1], static_cast<hsize_t>(kDim));
    const std::vector<int64_t> t = read_truncated(path_);
    ASSERT_EQ(t.size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const RowResult want = embed_row(i);
      EXPECT_EQ(t[static_cast<size_t>(i)], want.truncated_tokens) << "row " << i;
      for (int64_t k = 0; k < kDim; ++k) {
        const float got = e[static_cast<size_t>(i * kDim + k)];
        if (want.embedding.empty()) EXPECT_TRUE(std::isnan(got)) << "error row " << i;
        else EXPECT_EQ(got, want.embedding[static_cast<size_t>(k)]) << "row " << i;
      }
    }
  }
  std::string path_;
};

}  // namespace

TEST_F(EmbeddingResults, RowsInInputOrderErrorsNaN) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, embed_info(6));
  for (int64_t i : {5, 0, 3, 2, 1, 4}) w->write(embed_row(i));
  w->finish(RunMetrics{});
  expect_rows(6);
}

TEST_F(EmbeddingResults, ExtendedPastTheCountedRows) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, embed_info(2));
  for (int64_t i = 0; i < 4; ++i) w->write(embed_row(i));
  w->finish(RunMetrics{});
  expect_rows(4);
}

TEST_F(EmbeddingResults, ResumedInPlaceAndAfterACutOffRun) {
  {
    auto w = ResultWriter::open(path_, IfExists::kOverwrite, embed_info(6));
    w->write(embed_row(0));
    w->write(embed_row(2));
    w->finish(RunMetrics{});
  }
  {
    auto w = ResultWriter::open(path_, IfExists::kResume, embed_info(6));  // closed cleanly: in place
    EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 0, 1, 0, 0, 0}));
    w->write(embed_row(1));
    w->write(embed_row(4));
    w->flush();  // not finished: as after kill -9
  }
  {
    auto w = ResultWriter::open(path_, IfExists::kResume, embed_info(6));  // rebuilt into a fresh file
    EXPECT_EQ(w->done_rows(), (std::vector<uint8_t>{1, 1, 1, 0, 1, 0}));
    w->write(embed_row(3));
    w->write(embed_row(5));
    w->finish(RunMetrics{});
  }
  expect_rows(6);
}

TEST_F(EmbeddingResults, ResumeRefusesAFileWithoutEmbeddings) {
  RunInfo plain = embed_info(3);
  plain.embedding_dim = 0;
  plain.truncated_tokens = false;
  ResultWriter::open(path_, IfExists::kOverwrite, plain)->finish(RunMetrics{});
  try {
    ResultWriter::open(path_, IfExists::kResume, embed_info(3));
    ADD_FAILURE() << "resumed a file without /embedding";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no dataset '/embedding'"), std::string::npos) << e.what();
  }
}

TEST_F(EmbeddingResults, WrongWidthIsAnError) {
  auto w = ResultWriter::open(path_, IfExists::kOverwrite, embed_info(1));
  RowResult r = embed_row(0);
  r.embedding.pop_back();
  w->write(r);
  EXPECT_THROW(w->flush(), Error);
}

namespace {
JobSpec embed_job(Task task = Task::kEmbed) {
  JobSpec j;
  j.task = task;
  return j;
}
std::string bad_line(const std::string& line, const JobSpec& j) {
  try {
    parse_input_row(line, 6, j, 512);
  } catch (const BadLine& b) {
    return b.reason;
  }
  return "";
}
}  // namespace

TEST(EmbeddingInputRows, OpenAiEmbeddingsRequestsAreEmbedRows) {
  const InputRow text = parse_input_row(
      R"({"custom_id": "e1", "method": "POST", "url": "/v1/embeddings", "body": {"model": "m", "input": "Hi", "encoding_format": "float"}})",
      0, embed_job(), 512);
  EXPECT_EQ(text.id, "e1");
  EXPECT_EQ(text.text.value(), "Hi");
  const InputRow one = parse_input_row(
      R"({"custom_id": "e2", "url": "/v1/embeddings", "body": {"input": ["Hi there"]}})", 0, embed_job(), 512);
  EXPECT_EQ(one.text.value(), "Hi there");
  const InputRow ids = parse_input_row(
      R"({"custom_id": "e3", "url": "/v1/embeddings", "body": {"input": [1, 5, 9]}})", 0, embed_job(), 512);
  EXPECT_EQ(ids.tokens.value(), (std::vector<int32_t>{1, 5, 9}));
  EXPECT_FALSE(ids.text.has_value());
  EXPECT_NE(bad_line(R"({"custom_id": "r", "url": "/v1/embeddings", "body": {"input": [1, 600]}})", embed_job())
                .find("out of range"),
            std::string::npos);
  EXPECT_EQ(bad_line(R"({"custom_id": "r", "url": "/v1/embeddings", "body": {"input": "x"}})", embed_job(Task::kScore)),
            "input line 7: url '/v1/embeddings' asks for an embedding, but this job's task is score (an embeddings "
            "batch needs task: embed)");
  EXPECT_EQ(bad_line(R"({"custom_id": "r", "url": "/v1/embeddings", "body": {"input": ["a", "b"]}})", embed_job()),
            "input line 7: 'body.input' must be a string or a non-empty list of token ids (one input per request)");
  EXPECT_EQ(bad_line(R"({"custom_id": "r", "url": "/v1/embeddings", "body": {"input": "a", "encoding_format": "base64"}})",
                     embed_job()),
            "input line 7: 'body.encoding_format' must be \"float\" (embeddings are stored as float32)");
  EXPECT_EQ(bad_line(R"({"custom_id": "r", "url": "/v1/embeddings", "body": {"input": "a", "dimensions": 8}})",
                     embed_job())
                .rfind("input line 7: unknown key 'body.dimensions'", 0),
            0u);
  EXPECT_EQ(bad_line(R"({"custom_id": "r", "url": "/v1/embeddings", "body": {}})", embed_job()),
            "input line 7: field 'body.input' is missing");
  // Completions requests are not embed rows.
  EXPECT_EQ(bad_line(R"({"custom_id": "r", "url": "/v1/completions", "body": {"prompt": "x"}})", embed_job()),
            "input line 7: OpenAI batch requests need task: generate");
}

TEST(EmbeddingJobKeys, EmbedSectionAndTruncate) {
  const fs::path dir = fs::temp_directory_path() / ("tpbatch_embed_keys_" + std::to_string(::getpid()));
  fs::create_directories(dir / "model");
  { std::ofstream(dir / "in.jsonl") << "{}\n"; }
  const std::string base = "model: " + (dir / "model").string() + "\ninput:\n  path: " + (dir / "in.jsonl").string() + "\n";
  const JobSpec j = parse_job(base + "task: embed\nembed:\n  pooling: mean\n  normalize: false\n", {}, dir);
  EXPECT_EQ(j.task, Task::kEmbed);
  EXPECT_EQ(j.embed.pooling, Pooling::Mean);
  EXPECT_FALSE(j.embed.normalize);
  EXPECT_NE(j.effective_yaml.find("pooling: mean"), std::string::npos) << j.effective_yaml;
  EXPECT_EQ(j.input.truncate, Truncate::kError);
  const JobSpec d = parse_job(base + "task: embed\n", {"input.truncate=left"}, dir);
  EXPECT_EQ(d.embed.pooling, Pooling::Last);
  EXPECT_TRUE(d.embed.normalize);
  EXPECT_EQ(d.input.truncate, Truncate::kLeft);
  // Other tasks' effective job is as before the keys existed (their files still resume).
  const JobSpec g = parse_job(base, {}, dir);
  EXPECT_EQ(g.effective_yaml.find("embed:"), std::string::npos);
  EXPECT_EQ(g.effective_yaml.find("truncate:"), std::string::npos);
  try {
    parse_job(base + "task: embed\nembed:\n  pooling: max\n", {}, dir);
    ADD_FAILURE() << "pooling: max accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("embed.pooling"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), 2);
  }
  try {
    parse_job(base, {"input.truncate=right"}, dir);
    ADD_FAILURE() << "truncate: right accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input.truncate"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}
