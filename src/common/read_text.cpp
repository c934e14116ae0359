#include "common/read_text.h"

#include <fstream>
#include <sstream>

#include "common/error.h"

namespace tpbatch {

std::optional<std::string> try_read_text(const std::filesystem::path& path, ReadFailure* why) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (why) *why = ReadFailure::kCannotOpen;
    return std::nullopt;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) {
    if (why) *why = ReadFailure::kReadError;
    return std::nullopt;
  }
  return std::move(ss).str();
}

std::string read_text(const std::filesystem::path& path) {
  ReadFailure why{};
  std::optional<std::string> text = try_read_text(path, &why);
  if (!text) throw Error(path.string() + (why == ReadFailure::kCannotOpen ? ": cannot open for reading" : ": read error"));
  return std::move(*text);
}

}  // namespace tpbatch
