// Memory-mapped safetensors weights, validated on open.
#include "model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/read_text.h"

namespace tpbatch {

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

using nlohmann::json;

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

bool parse_dtype(const std::string& s, DType& out) {
  if (s == "F32") out = DType::F32;
  else if (s == "F16") out = DType::F16;
  else if (s == "BF16") out = DType::BF16;
  else if (s == "F8_E4M3") out = DType::F8E4M3;
  else if (s == "I8") out = DType::I8;    // compressed-tensors W8A8 weights
  else if (s == "I32") out = DType::I32;  // 4-bit checkpoints' packed words, g_idx
  else if (s == "I64") out = DType::I64;  // compressed-tensors' weight_shape
  else return false;
  return true;
}

}  // namespace

// One function: the header's checks in the format's order (length, JSON, each entry, overlaps), each naming the tensor.
std::vector<TensorInfo> parse_safetensors_header(const std::byte* data, size_t file_size, const std::string& label) {
  if (file_size < 8)
    throw Error(label + ": not a safetensors file: " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint64_t(std::to_integer<uint8_t>(data[i]));
  if (header_len > file_size - 8)
    throw Error(label + ": header length " + std::to_string(header_len) + " runs past the end of the file (" +
                std::to_string(file_size) + " bytes; truncated or not a safetensors file)");
  const uint64_t data_size = file_size - 8 - header_len;

  json header;
  // The JSON parser keeps the last of duplicated keys: a tensor named twice would silently take
  // the later entry. The callback sees every top-level key as it is read.
  std::set<std::string> names_seen;
  std::string duplicate;
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string() && duplicate.empty() &&
        !names_seen.insert(parsed.get_ref<const std::string&>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  try {
    const char* text = reinterpret_cast<const char*>(data + 8);
    header = json::parse(text, text + header_len, on_event);
  } catch (const json::exception& e) {  // parse_error, or out_of_range: a number that overflows a double
    throw Error(label + ": header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw Error(label + ": header is not a JSON object");
  if (!duplicate.empty())
    throw Error(label + ": tensor '" + duplicate + "' appears twice in the header (which copy is meant is unknowable)");

  std::vector<TensorInfo> out;
  out.reserve(header.size());
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object() && !it->is_null()) throw Error(label + ": __metadata__ is not an object");
      continue;
    }
    const std::string where = label + ": tensor '" + name + "'";
    const json& e = *it;
    if (!e.is_object()) throw Error(where + ": entry is not an object");
    if (!e.contains("dtype") || !e.at("dtype").is_string()) throw Error(where + ": missing or non-string dtype");
    if (!e.contains("shape") || !e.at("shape").is_array()) throw Error(where + ": missing or non-array shape");
    if (!e.contains("data_offsets") || !e.at("data_offsets").is_array() || e.at("data_offsets").size() != 2)
      throw Error(where + ": data_offsets must be a list [begin, end]");

    TensorInfo t;
    t.name = name;
    t.file = label;
    const std::string dt = e.at("dtype").get<std::string>();
    if (!parse_dtype(dt, t.dtype))
      throw Error(where + ": unsupported dtype '" + dt + "' (supported: F32, F16, BF16, F8_E4M3, I32, I64)");
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : e.at("shape")) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        throw Error(where + ": shape " + e.at("shape").dump() + " has a non-integer or negative dimension");
      uint64_t v = d.get<uint64_t>();
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) overflow = true;
      t.shape.push_back(int64_t(v));
      if (v != 0 && numel > std::numeric_limits<uint64_t>::max() / v) overflow = true;
      numel *= v;
    }
    for (const json& o : e.at("data_offsets"))
      if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
        throw Error(where + ": data_offsets " + e.at("data_offsets").dump() + " are not non-negative integers");
    t.begin = e.at("data_offsets")[0].get<uint64_t>();
    t.end = e.at("data_offsets")[1].get<uint64_t>();
    if (t.end < t.begin) throw Error(where + ": data_offsets " + e.at("data_offsets").dump() + " end before they begin");
    if (t.end > data_size)
      throw Error(where + ": data_offsets " + e.at("data_offsets").dump() + " run past the end of the file (data section is " +
                  std::to_string(data_size) + " bytes; truncated file?)");
    const uint64_t esize = dtype_size(t.dtype);
    if (overflow || numel > std::numeric_limits<uint64_t>::max() / esize || numel * esize != t.end - t.begin)
      throw Error(where + ": shape " + shape_str(t.shape) + " x " + dt + " needs " +
                  (overflow ? std::string("too many") : std::to_string(numel * esize)) + " bytes but data_offsets span " +
                  std::to_string(t.end - t.begin));
    out.push_back(std::move(t));
  }

  // Overlapping byte ranges.
  std::vector<const TensorInfo*> order;
  for (const TensorInfo& t : out)
    if (t.end > t.begin) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorInfo* a, const TensorInfo* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->name < b->name;
  });
  for (size_t i = 1; i < order.size(); ++i)
    if (order[i]->begin < order[i - 1]->end)
      throw Error(label + ": tensor '" + order[i]->name + "' bytes [" + std::to_string(order[i]->begin) + ", " +
                  std::to_string(order[i]->end) + ") overlap tensor '" + order[i - 1]->name + "' bytes [" +
                  std::to_string(order[i - 1]->begin) + ", " + std::to_string(order[i - 1]->end) + ")");
  return out;
}

// ---- MappedFile -----------------------------------------------------------------------------------

class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path) : path_(path.string()) {
    fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(path_ + ": cannot open: " + std::strerror(errno));
    struct stat st{};
    if (::fstat(fd_, &st) != 0) {
      int err = errno;
      ::close(fd_);
      throw Error(path_ + ": cannot stat: " + std::strerror(err));
    }
    size_ = size_t(st.st_size);
    if (size_ == 0) return;  // nothing to map; the header parser reports it
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd_);
      throw Error(path_ + ": cannot mmap: " + std::strerror(err));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  void drop() const {
    if (data_) ::madvise(const_cast<std::byte*>(data_), size_, MADV_DONTNEED);
    if (fd_ >= 0) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
  }

 private:
  std::string path_;
  int fd_ = -1;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

// ---- WeightStore ----------------------------------------------------------------------------------

WeightStore::WeightStore() = default;
WeightStore::WeightStore(WeightStore&&) noexcept = default;
WeightStore& WeightStore::operator=(WeightStore&&) noexcept = default;
WeightStore::~WeightStore() = default;

namespace {

// Maps one safetensors file and returns its validated tensors with data pointers set.
std::vector<TensorInfo> map_and_parse(const MappedFile& f) {
  static const std::byte empty[1] = {};
  std::vector<TensorInfo> tensors = parse_safetensors_header(f.data() ? f.data() : empty, f.size(), f.path());
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | uint64_t(std::to_integer<uint8_t>(f.data()[i]));
  const std::byte* base = f.data() + 8 + header_len;
  for (TensorInfo& t : tensors) t.data = base + t.begin;
  return tensors;
}

}  // namespace

WeightStore WeightStore::open(const std::filesystem::path& model_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) throw Error(model_dir.string() + ": model folder does not exist or is not a folder");
  WeightStore store;
  const fs::path single = model_dir / "model.safetensors";
  const fs::path index = model_dir / "model.safetensors.index.json";

  auto add = [&store](const TensorInfo& t) {
    auto [it, inserted] = store.tensors_.emplace(t.name, t);
    if (!inserted)
      throw Error(t.file + ": tensor '" + t.name + "' also appears in " + it->second.file);
  };

  if (fs::exists(single, ec)) {
    store.files_.push_back(std::make_unique<MappedFile>(single));
    for (const TensorInfo& t : map_and_parse(*store.files_.back())) add(t);
    return store;
  }
  if (!fs::exists(index, ec))
    throw Error(model_dir.string() + ": no model.safetensors or model.safetensors.index.json in the model folder");

  const std::string ilabel = index.string();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_text(index));
  } catch (const nlohmann::json::exception& e) {
    throw Error(ilabel + ": not valid JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object())
    throw Error(ilabel + ": must be an object with a 'weight_map' object");
  const auto& wm = j.at("weight_map");
  if (wm.empty()) throw Error(ilabel + ": weight_map is empty");

  // Shard file -> first tensor naming it (for messages), in a stable order.
  std::map<std::string, std::string> shards;
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    if (!it->is_string()) throw Error(ilabel + ": weight_map entry for tensor '" + it.key() + "' is not a file name");
    const std::string file = it->get<std::string>();
    bool bad = file.empty() || fs::path(file).is_absolute();
    for (const auto& part : fs::path(file)) bad = bad || part == "..";
    if (bad)
      throw Error(ilabel + ": tensor '" + it.key() + "': bad shard file name '" + file + "'");
    shards.emplace(file, it.key());
  }
  std::map<std::string, std::set<std::string>> shard_tensors;
  for (const auto& [file, first_tensor] : shards) {
    const fs::path p = model_dir / file;
    if (!fs::is_regular_file(p, ec))
      throw Error(ilabel + ": tensor '" + first_tensor + "' is in shard '" + file + "', which does not exist (" + p.string() + ")");
    store.files_.push_back(std::make_unique<MappedFile>(p));
    auto& names = shard_tensors[file];
    for (const TensorInfo& t : map_and_parse(*store.files_.back())) {
      add(t);
      names.insert(t.name);
    }
  }
  for (auto it = wm.begin(); it != wm.end(); ++it) {
    const std::string file = it->get<std::string>();
    if (!shard_tensors[file].count(it.key()))
      throw Error(ilabel + ": tensor '" + it.key() + "' is listed in shard '" + file + "' but " +
                  (model_dir / file).string() + " does not contain it");
  }
  return store;
}

bool WeightStore::has(const std::string& name) const { return tensors_.count(name) != 0; }

const TensorInfo& WeightStore::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    std::string where = files_.empty() ? std::string("weights") : files_.front()->path();
    if (files_.size() > 1) where += " (and " + std::to_string(files_.size() - 1) + " more shards)";
    throw Error(where + ": tensor '" + name + "' is missing");
  }
  return it->second;
}

void WeightStore::add_logical(const TensorInfo& t) {
  auto [it, inserted] = tensors_.emplace(t.name, t);
  if (!inserted) throw Error(t.file + ": tensor '" + t.name + "' is in the checkpoint beside its packed 4-bit form");
  it->second.data = nullptr;
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;
}

void WeightStore::expect_shape(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorInfo& t = tensor(name);
  if (t.shape != shape)
    throw Error(t.file + ": tensor '" + name + "': shape " + shape_str(t.shape) + " but config.json implies " +
                shape_str(shape));
}

void WeightStore::read(const std::string& name, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols, DType to,
                       void* out) const {
  const TensorInfo& t = tensor(name);
  int64_t rows = 0, cols = 0;
  if (t.shape.size() == 2) {
    rows = t.shape[0];
    cols = t.shape[1];
  } else if (t.shape.size() == 1) {
    rows = 1;
    cols = t.shape[0];
  } else if (t.shape.empty()) {
    rows = cols = 1;
  } else {
    throw Error(t.file + ": tensor '" + name + "': reading needs a 1-D or 2-D tensor, shape is " + shape_str(t.shape));
  }
  if (row0 < 0 || nrows < 0 || col0 < 0 || ncols < 0 || row0 > rows - nrows || col0 > cols - ncols)
    throw Error(t.file + ": tensor '" + name + "' of shape " + shape_str(t.shape) + ": block rows [" +
                std::to_string(row0) + ", +" + std::to_string(nrows) + ") x columns [" + std::to_string(col0) + ", +" +
                std::to_string(ncols) + ") is out of range");
  if (nrows == 0 || ncols == 0) return;
  // Packed 4-bit weights and integer tensors mean nothing as floats: they are read through their
  // quantization format (model/int4_checkpoint.h), whose logical I4 weights have no bytes of their own.
  if ((t.dtype == DType::I4 || t.dtype == DType::I32 || t.dtype == DType::I64) && to != t.dtype)
    throw Error(t.file + ": tensor '" + name + "' is " + dtype_name(t.dtype) +
                (t.dtype == DType::I4 ? " (4-bit quantized)" : "") +
                " where config.json's quantization_config expects an unquantized tensor");
  if (!t.data) throw Error(t.file + ": tensor '" + name + "' is not mapped");

  const size_t es = dtype_size(t.dtype);
  const std::byte* base = t.data + (size_t(row0) * size_t(cols) + size_t(col0)) * es;
  const size_t row_stride = size_t(cols) * es;
  auto* dst = static_cast<std::byte*>(out);
  const size_t out_row = size_t(ncols) * dtype_size(to);
  if (to == t.dtype) {  // the storage type: plain row copies
    if (ncols == cols) {
      std::memcpy(dst, base, size_t(nrows) * out_row);
    } else {
      for (int64_t r = 0; r < nrows; ++r) std::memcpy(dst + size_t(r) * out_row, base + size_t(r) * row_stride, out_row);
    }
    return;
  }
  if (to == DType::I32 || to == DType::F8E4M3 || to == DType::I8)
    throw Error(t.file + ": tensor '" + name + "' cannot be read as " + dtype_name(to));
  // 8-bit values mean nothing without their scales (model/weight_staging.h reads both).
  if (t.dtype == DType::F8E4M3 || t.dtype == DType::I8)
    throw Error(t.file + ": tensor '" + name + "' is quantized (" + dtype_name(t.dtype) +
                ") where config.json's quantization_config expects an unquantized tensor");
  auto load = [&](const std::byte* p) -> float {
    uint16_t h;
    float f;
    switch (t.dtype) {
      case DType::F16: std::memcpy(&h, p, 2); return f16_to_f32(h);
      case DType::BF16: std::memcpy(&h, p, 2); return bf16_to_f32(h);
      default: std::memcpy(&f, p, 4); return f;
    }
  };
  for (int64_t r = 0; r < nrows; ++r) {
    const std::byte* src = base + size_t(r) * row_stride;
    std::byte* d = dst + size_t(r) * out_row;
    for (int64_t c = 0; c < ncols; ++c) {
      const float f = load(src + size_t(c) * es);
      if (to == DType::F32) {
        std::memcpy(d + size_t(c) * 4, &f, 4);
      } else {
        const uint16_t h = to == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f);
        std::memcpy(d + size_t(c) * 2, &h, 2);
      }
    }
  }
}

void WeightStore::read_f32(const std::string& name, int64_t row0, int64_t nrows, int64_t col0, int64_t ncols,
                           float* out) const {
  read(name, row0, nrows, col0, ncols, DType::F32, out);
}

void WeightStore::drop_page_cache() const {
  for (const auto& f : files_) f->drop();
}

}  // namespace tpbatch
