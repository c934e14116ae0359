#include "io/optional_datasets.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tpbatch {

using namespace h5;

namespace {

constexpr const char* kEmbedding = "embedding";

// The 1-D integer columns: name, file type, and the RowResult field (read and written as int64).
struct IntColumn {
  const char* name;
  hid_t (*file_type)();
  int64_t (*get)(const RowResult&);
  void (*set)(RowResult&, int64_t);
};
hid_t i64le() { return H5T_STD_I64LE; }
hid_t i32le() { return H5T_STD_I32LE; }
const IntColumn kIntColumns[] = {
    {"truncated_tokens", i64le, [](const RowResult& r) { return r.truncated_tokens; },
     [](RowResult& r, int64_t v) { r.truncated_tokens = v; }},
    {"input_line", i64le, [](const RowResult& r) { return r.line; }, [](RowResult& r, int64_t v) { r.line = v; }},
    {"sample", i32le, [](const RowResult& r) { return static_cast<int64_t>(r.sample); },
     [](RowResult& r, int64_t v) { r.sample = static_cast<int32_t>(v); }},
};
constexpr hsize_t kChunkRows = 1024;
constexpr hsize_t kEmbeddingChunkValues = 1 << 18;  // 1 MiB float32 chunks whatever the width

}  // namespace

OptionalDatasetSpec optional_datasets_in(hid_t file) {
  OptionalDatasetSpec spec;
  if (H5Lexists(file, kEmbedding, H5P_DEFAULT) > 0) {
    H5Handle ds(H5Dopen2(file, kEmbedding, H5P_DEFAULT), H5Dclose);
    if (ds.valid()) {
      H5Handle sp(H5Dget_space(ds), H5Sclose);
      hsize_t dims[2] = {0, 0};
      if (H5Sget_simple_extent_ndims(sp) == 2 && H5Sget_simple_extent_dims(sp, dims, nullptr) == 2)
        spec.embedding_dim = static_cast<int64_t>(dims[1]);
    }
  }
  spec.truncated_tokens = H5Lexists(file, kIntColumns[0].name, H5P_DEFAULT) > 0;
  spec.samples = H5Lexists(file, kIntColumns[2].name, H5P_DEFAULT) > 0;
  return spec;
}

bool OptionalDatasets::wanted(int column) const { return column == 0 ? spec_.truncated_tokens : spec_.samples; }

void OptionalDatasets::create(hid_t file, int64_t rows) {
  if (spec_.embedding_dim > 0) {
    const hsize_t dim = static_cast<hsize_t>(spec_.embedding_dim);
    hsize_t dims[2] = {static_cast<hsize_t>(rows), dim}, maxdims[2] = {H5S_UNLIMITED, dim};
    hsize_t chunk[2] = {std::clamp<hsize_t>(kEmbeddingChunkValues / dim, 1, kChunkRows), dim};
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl, 2, chunk);
    const float nan = std::numeric_limits<float>::quiet_NaN();  // rows without an embedding (errors)
    H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &nan);
    H5Handle space(H5Screate_simple(2, dims, maxdims), H5Sclose);
    embedding_ = H5Handle(check(H5Dcreate2(file, kEmbedding, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                                path_, "cannot create dataset '/embedding'"),
                          H5Dclose);
  }
  for (int c = 0; c < kNumIntColumns; ++c) {
    if (!wanted(c)) continue;
    const IntColumn& col = kIntColumns[c];
    hsize_t dims = static_cast<hsize_t>(rows), maxdims = H5S_UNLIMITED, chunk = kChunkRows;
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
    columns_[c] = H5Handle(check(H5Dcreate2(file, col.name, col.file_type(), space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                                 path_, std::string("cannot create dataset '/") + col.name + "'"),
                           H5Dclose);
  }
}

std::string OptionalDatasets::open(hid_t file, int64_t rows) {
  auto open_one = [&](const char* name, int rank, hsize_t width, H5Handle& out) -> std::string {
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0) return std::string("it has no dataset '/") + name + "'";
    out = H5Handle(check(H5Dopen2(file, name, H5P_DEFAULT), path_, std::string("cannot open dataset '/") + name + "'"),
                   H5Dclose);
    H5Handle sp(H5Dget_space(out), H5Sclose);
    hsize_t dims[2] = {0, 0};
    if (H5Sget_simple_extent_ndims(sp) != rank)
      return std::string("dataset '/") + name + "' is not " + std::to_string(rank) + "-D";
    H5Sget_simple_extent_dims(sp, dims, nullptr);
    if (static_cast<int64_t>(dims[0]) != rows)
      return std::string("dataset '/") + name + "' has " + std::to_string(dims[0]) + " rows, not " + std::to_string(rows);
    if (rank == 2 && dims[1] != width)
      return std::string("dataset '/") + name + "' has " + std::to_string(dims[1]) + " columns, the model's hidden size is " +
             std::to_string(width);
    return "";
  };
  if (spec_.embedding_dim > 0)
    if (std::string why = open_one(kEmbedding, 2, static_cast<hsize_t>(spec_.embedding_dim), embedding_); !why.empty())
      return why;
  for (int c = 0; c < kNumIntColumns; ++c)
    if (wanted(c))
      if (std::string why = open_one(kIntColumns[c].name, 1, 0, columns_[c]); !why.empty()) return why;
  return "";
}

void OptionalDatasets::close() {
  embedding_.reset();
  for (auto& c : columns_) c.reset();
}

void OptionalDatasets::extend(int64_t rows) {
  if (embedding_.valid()) {
    hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(spec_.embedding_dim)};
    check(H5Dset_extent(embedding_, dims), path_, "cannot extend dataset '/embedding'");
  }
  for (int c = 0; c < kNumIntColumns; ++c)
    if (columns_[c].valid()) {
      hsize_t n = static_cast<hsize_t>(rows);
      check(H5Dset_extent(columns_[c], &n), path_, std::string("cannot extend dataset '/") + kIntColumns[c].name + "'");
    }
}

void OptionalDatasets::write(int64_t start, const std::vector<const RowResult*>& rows) {
  const size_t n = rows.size();
  if (embedding_.valid()) {
    const size_t dim = static_cast<size_t>(spec_.embedding_dim);
    std::vector<float> buf(n * dim, std::numeric_limits<float>::quiet_NaN());
    for (size_t i = 0; i < n; ++i) {
      const std::vector<float>& e = rows[i]->embedding;
      if (e.empty()) continue;  // an error row: NaN
      if (e.size() != dim)
        throw Error("results file '" + path_ + "': row " + std::to_string(rows[i]->index) + " has an embedding of " +
                    std::to_string(e.size()) + " values, '/embedding' has " + std::to_string(dim) + " columns");
      std::copy(e.begin(), e.end(), buf.begin() + static_cast<std::ptrdiff_t>(i * dim));
    }
    hsize_t s[2] = {static_cast<hsize_t>(start), 0}, c[2] = {n, dim};
    H5Handle fspace(H5Dget_space(embedding_), H5Sclose);
    check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, s, nullptr, c, nullptr), path_,
          "cannot select rows of dataset '/embedding'");
    H5Handle mspace(H5Screate_simple(2, c, nullptr), H5Sclose);
    check(H5Dwrite(embedding_, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, buf.data()), path_,
          "cannot write rows " + std::to_string(start) + ".." + std::to_string(start + static_cast<int64_t>(n) - 1) +
              " of dataset '/embedding'");
  }
  for (int c = 0; c < kNumIntColumns; ++c) {
    if (!columns_[c].valid()) continue;
    const IntColumn& col = kIntColumns[c];
    std::vector<int64_t> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = col.get(*rows[i]);
    hsize_t s = static_cast<hsize_t>(start), cnt = n;
    H5Handle fspace(H5Dget_space(columns_[c]), H5Sclose);
    check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &cnt, nullptr), path_,
          std::string("cannot select rows of dataset '/") + col.name + "'");
    H5Handle mspace(H5Screate_simple(1, &cnt, nullptr), H5Sclose);
    check(H5Dwrite(columns_[c], H5T_NATIVE_INT64, mspace, fspace, H5P_DEFAULT, buf.data()), path_,
          std::string("cannot write dataset '/") + col.name + "'");
  }
}

void OptionalDatasets::read(int64_t start, int64_t count, std::vector<RowResult>& rows) {
  const size_t n = static_cast<size_t>(count);
  if (embedding_.valid()) {
    const size_t dim = static_cast<size_t>(spec_.embedding_dim);
    std::vector<float> buf(n * dim);
    hsize_t s[2] = {static_cast<hsize_t>(start), 0}, c[2] = {n, dim};
    H5Handle fspace(H5Dget_space(embedding_), H5Sclose);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, s, nullptr, c, nullptr);
    H5Handle mspace(H5Screate_simple(2, c, nullptr), H5Sclose);
    check(H5Dread(embedding_, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, buf.data()), path_,
          "cannot read dataset '/embedding'");
    for (size_t i = 0; i < n && i < rows.size(); ++i) {
      const float* p = buf.data() + i * dim;
      if (rows[i].finish_reason == FinishReason::kError || std::isnan(p[0])) continue;
      rows[i].embedding.assign(p, p + dim);
    }
  }
  for (int c = 0; c < kNumIntColumns; ++c) {
    if (!columns_[c].valid()) continue;
    const IntColumn& col = kIntColumns[c];
    std::vector<int64_t> buf(n);
    hsize_t s = static_cast<hsize_t>(start), cnt = n;
    H5Handle fspace(H5Dget_space(columns_[c]), H5Sclose);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &cnt, nullptr);
    H5Handle mspace(H5Screate_simple(1, &cnt, nullptr), H5Sclose);
    check(H5Dread(columns_[c], H5T_NATIVE_INT64, mspace, fspace, H5P_DEFAULT, buf.data()), path_,
          std::string("cannot read dataset '/") + col.name + "'");
    for (size_t i = 0; i < n && i < rows.size(); ++i) col.set(rows[i], buf[i]);
  }
}

}  // namespace tpbatch
