#pragma once
// A string -> id map that can be searched with a string_view.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace tpbatch::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Ids must lie in [0, kMaxTokenId].
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 22) - 1;  // real vocabularies are < 1M

}  // namespace tpbatch::tok
