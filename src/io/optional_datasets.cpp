#include "io/optional_datasets.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tpbatch {

using namespace h5;

namespace {

constexpr const char* kEmbedding = "embedding";
constexpr const char* kTruncated = "truncated_tokens";
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
  spec.truncated_tokens = H5Lexists(file, kTruncated, H5P_DEFAULT) > 0;
  return spec;
}

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
  if (spec_.truncated_tokens) {
    hsize_t dims = static_cast<hsize_t>(rows), maxdims = H5S_UNLIMITED, chunk = kChunkRows;
    H5Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
    H5Pset_chunk(dcpl, 1, &chunk);
    H5Handle space(H5Screate_simple(1, &dims, &maxdims), H5Sclose);
    truncated_ = H5Handle(check(H5Dcreate2(file, kTruncated, H5T_STD_I64LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                                path_, "cannot create dataset '/truncated_tokens'"),
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
  if (spec_.truncated_tokens)
    if (std::string why = open_one(kTruncated, 1, 0, truncated_); !why.empty()) return why;
  return "";
}

void OptionalDatasets::close() {
  embedding_.reset();
  truncated_.reset();
}

void OptionalDatasets::extend(int64_t rows) {
  if (embedding_.valid()) {
    hsize_t dims[2] = {static_cast<hsize_t>(rows), static_cast<hsize_t>(spec_.embedding_dim)};
    check(H5Dset_extent(embedding_, dims), path_, "cannot extend dataset '/embedding'");
  }
  if (truncated_.valid()) {
    hsize_t n = static_cast<hsize_t>(rows);
    check(H5Dset_extent(truncated_, &n), path_, "cannot extend dataset '/truncated_tokens'");
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
  if (truncated_.valid()) {
    std::vector<int64_t> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = rows[i]->truncated_tokens;
    hsize_t s = static_cast<hsize_t>(start), c = n;
    H5Handle fspace(H5Dget_space(truncated_), H5Sclose);
    check(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr), path_,
          "cannot select rows of dataset '/truncated_tokens'");
    H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
    check(H5Dwrite(truncated_, H5T_NATIVE_INT64, mspace, fspace, H5P_DEFAULT, buf.data()), path_,
          "cannot write dataset '/truncated_tokens'");
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
      if (rows[i].finish_reason == "error" || std::isnan(p[0])) continue;
      rows[i].embedding.assign(p, p + dim);
    }
  }
  if (truncated_.valid()) {
    std::vector<int64_t> buf(n);
    hsize_t s = static_cast<hsize_t>(start), c = n;
    H5Handle fspace(H5Dget_space(truncated_), H5Sclose);
    H5Sselect_hyperslab(fspace, H5S_SELECT_SET, &s, nullptr, &c, nullptr);
    H5Handle mspace(H5Screate_simple(1, &c, nullptr), H5Sclose);
    check(H5Dread(truncated_, H5T_NATIVE_INT64, mspace, fspace, H5P_DEFAULT, buf.data()), path_,
          "cannot read dataset '/truncated_tokens'");
    for (size_t i = 0; i < n && i < rows.size(); ++i) rows[i].truncated_tokens = buf[i];
  }
}

}  // namespace tpbatch
