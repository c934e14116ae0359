#pragma once
// Whole small text files (config.json, tokenizer.json, chat templates, the safetensors index), read
// once and checked: a file that cannot be opened and one whose read fails part way (the stream's
// bad(): EIO, a folder on some file systems) are both failures, never a short string.
#include <filesystem>
#include <optional>
#include <string>

namespace tpbatch {

enum class ReadFailure { kCannotOpen, kReadError };

// The file's bytes, unchanged; nullopt on failure, with the reason in *why when given. For callers
// whose error names the file in their own words.
std::optional<std::string> try_read_text(const std::filesystem::path& path, ReadFailure* why = nullptr);

// try_read_text, throwing Error (exit 1) "<path>: cannot open for reading" / "<path>: read error".
std::string read_text(const std::filesystem::path& path);

}  // namespace tpbatch
