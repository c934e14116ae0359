#include "reliability/model_fingerprint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <vector>

#include "common/error.h"

namespace tpbatch {
namespace {

namespace fs = std::filesystem;

std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}

class Fd {
 public:
  explicit Fd(const std::string& path) : path_(path), fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
    if (fd_ < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  }
  ~Fd() { ::close(fd_); }
  uint64_t size() const {
    struct stat st{};
    if (::fstat(fd_, &st) != 0) throw Error(path_ + ": cannot stat: " + std::strerror(errno));
    return static_cast<uint64_t>(st.st_size);
  }
  // FNV-1a of bytes [at, at + n) (fewer at the end of the file), continuing from h.
  uint64_t hash(uint64_t at, uint64_t n, uint64_t h) const {
    std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(n, 1 << 20)));
    while (n > 0) {
      const ssize_t got = ::pread(fd_, buf.data(), std::min<uint64_t>(n, buf.size()), static_cast<off_t>(at));
      if (got < 0) throw Error(path_ + ": read error: " + std::strerror(errno));
      if (got == 0) break;
      h = fnv1a64(buf.data(), static_cast<size_t>(got), h);
      at += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
    return h;
  }

 private:
  std::string path_;
  int fd_;
};

std::string whole_file(const std::string& path) {
  Fd f(path);
  return hex(f.hash(0, f.size(), 0xcbf29ce484222325ull));
}

std::string safetensors_file(const std::string& path) {
  Fd f(path);
  const uint64_t size = f.size();
  uint64_t header = 0;  // the little-endian u64 length prefix
  if (size >= 8) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    unsigned char b[8] = {};
    if (fd >= 0 && ::pread(fd, b, 8, 0) == 8)
      for (int i = 7; i >= 0; --i) header = (header << 8) | b[i];
    if (fd >= 0) ::close(fd);
  }
  // The header (prefix + JSON) in full, then 64 blocks spread over the data.
  uint64_t h = 0xcbf29ce484222325ull;
  const uint64_t head = std::min<uint64_t>(size, 8 + std::min<uint64_t>(header, size));
  h = f.hash(0, head, h);
  const uint64_t rest = size - head, block = 4096, blocks = 64;
  if (rest <= block * blocks) {
    h = f.hash(head, rest, h);
  } else {
    for (uint64_t i = 0; i < blocks; ++i) h = f.hash(head + (rest - block) / (blocks - 1) * i, block, h);
  }
  return std::to_string(size) + ":" + hex(h);
}

std::map<std::string, std::string> parse(const std::string& fp) {
  std::map<std::string, std::string> out;
  size_t at = 0;
  while (at < fp.size()) {
    size_t end = fp.find(';', at);
    if (end == std::string::npos) end = fp.size();
    const std::string part = fp.substr(at, end - at);
    const size_t eq = part.find('=');
    if (eq == std::string::npos) return {};
    out[part.substr(0, eq)] = part.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

}  // namespace

std::string file_fingerprint(const std::string& path) {
  Fd f(path);
  return std::to_string(f.size()) + ":" + hex(f.hash(0, f.size(), 0xcbf29ce484222325ull));
}

uint64_t fnv1a64(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string model_fingerprint(const std::string& model_dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(model_dir, ec)) {
    const std::string n = e.path().filename().string();
    const bool text = n == "config.json" || n == "tokenizer.json" || n == "tokenizer_config.json" ||
                      n == "generation_config.json" || n == "model.safetensors.index.json";
    const bool weights = n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0;
    if ((text || weights) && e.is_regular_file(ec)) names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) {
    const std::string path = (fs::path(model_dir) / n).string();
    const bool weights = n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0;
    if (!out.empty()) out += ';';
    out += n + "=" + (weights ? safetensors_file(path) : whole_file(path));
  }
  return out;
}

std::string model_fingerprint_difference(const std::string& there, const std::string& here) {
  if (there == here) return "";
  const auto a = parse(there), b = parse(here);
  if (a.empty() || b.empty()) return "the model's fingerprint differs";
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  for (const auto& [name, v] : b) {
    auto it = a.find(name);
    if (it == a.end()) add(name + " is new");
    else if (it->second != v) add(name + " changed");
  }
  for (const auto& [name, v] : a)
    if (!b.count(name)) add(name + " is gone");
  return out;
}

}  // namespace tpbatch
