// libFuzzer target: tpbatch::parse_safetensors_header on arbitrary bytes.
// Expected: a vector of validated tensors or tpbatch::Error. Anything else is a finding: a crash, an
// ASan/UBSan report, another exception, or a returned tensor that breaks the documented invariants.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "model/safetensors.h"

namespace {

void check(const std::vector<tpbatch::TensorInfo>& tensors, uint64_t data_size) {
  for (const auto& t : tensors) {
    if (t.begin > t.end || t.end > data_size) std::abort();  // offsets inside the data section
    uint64_t n = 1;
    for (int64_t d : t.shape) {
      if (d < 0) std::abort();
      n *= static_cast<uint64_t>(d);
    }
    if (n * tpbatch::dtype_size(t.dtype) != t.end - t.begin) std::abort();  // bytes == shape x dtype
  }
}

uint64_t header_len(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // 1. The bytes as a whole file. Copied so that ASan sees the exact end of the "file".
  {
    std::vector<std::byte> file(size);
    if (size) std::memcpy(file.data(), data, size);
    try {
      auto t = tpbatch::parse_safetensors_header(file.data(), size, "fuzz.safetensors");
      check(t, size - 8 - header_len(data));
    } catch (const tpbatch::Error&) {
    }
  }
  // 2. The bytes as the JSON header, with a correct length prefix and a data section whose size the
  //    first byte picks (so that mutations explore the JSON rather than the length prefix).
  {
    const size_t data_size = size ? size_t(data[0]) * 16 : 0;
    std::vector<std::byte> file(8 + size + data_size);
    for (int i = 0; i < 8; ++i) file[size_t(i)] = std::byte((uint64_t(size) >> (8 * i)) & 0xff);
    if (size) std::memcpy(file.data() + 8, data, size);
    try {
      auto t = tpbatch::parse_safetensors_header(file.data(), file.size(), "fuzz.safetensors");
      check(t, data_size);
    } catch (const tpbatch::Error&) {
    }
  }
  return 0;
}
