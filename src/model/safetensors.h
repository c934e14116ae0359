#pragma once
// Memory-mapped safetensors weights: one model.safetensors, or model.safetensors.index.json + shards.
// Every tensor's dtype, shape and byte range are validated against its file when it is opened.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/dtype.h"

namespace tpbatch {


struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;                // byte offsets inside the file's data section
  uint64_t end = 0;
  const std::byte* data = nullptr;   // into the mapping (null until mapped)
  std::string file;                  // which file holds it, for messages
  int64_t numel() const;
};

// Parses a safetensors header (the 8-byte length prefix included) of a file of file_size bytes.
// Throws tpbatch::Error naming label and the offending tensor: bad JSON, unknown dtype,
// offsets past the file, overlapping ranges, byte length disagreeing with shape x dtype.
std::vector<TensorInfo> parse_safetensors_header(const std::byte* data, size_t file_size, const std::string& label);

class MappedFile;  // RAII mmap, defined in safetensors.cpp

class WeightStore {
 public:
  // Opens model_dir/model.safetensors, or model_dir/model.safetensors.index.json and its shards.
  static WeightStore open(const std::filesystem::path& model_dir);
  WeightStore();
  WeightStore(WeightStore&&) noexcept;
  WeightStore& operator=(WeightStore&&) noexcept;
  ~WeightStore();

  bool has(const std::string& name) const;
  const TensorInfo& tensor(const std::string& name) const;  // throws Error naming a missing tensor
  std::vector<std::string> names() const;
  // Lists a weight the checkpoint holds in another form (a 4-bit weight packed into I32 words
  // under other names, model/int4_checkpoint.h) under its plain name, with no bytes of its own.
  void add_logical(const TensorInfo& t);

  // Throws Error("tensor X: shape [a, b] but config.json implies [c, d]") on mismatch.
  void expect_shape(const std::string& name, const std::vector<int64_t>& shape) const;

  // Copies the block rows [row0, row0+nrows) x columns [col0, col0+ncols) of a 2-D tensor (a 1-D
  // tensor is one row) into out (row-major, ncols floats per row), converting to float32. Reads only
  // those bytes from the mapping: this is how tensor-parallel ranks load just their shard.
  void read_f32(const std::string& name, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols,
                float* out) const;
  // The same block converted to `to` (F32, BF16 or F16; a plain copy when it is the storage type).
  void read(const std::string& name, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols, DType to,
            void* out) const;

  // Releases the mapping's resident pages (after the shards were copied out).
  void drop_page_cache() const;

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace tpbatch
